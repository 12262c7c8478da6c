# SPDX-License-Identifier: Apache-2.0
"""Transfer, priority and max_hold in the Python binding (issue 42 items 1, 2
and 6): Elector.transfer / transfer_commit, on_transfer, LostReason.TRANSFERRED
and the options priority and max_hold, on a mem:// lock in virtual time
(s3lect.testing.Clock: deterministic, no server, no real sleeping)."""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Tuple

import pytest

import s3lect
from s3lect.testing import Clock

pytest_plugins = ["s3lect.testing"]

LEASE = 0.3
FAST: Dict[str, Any] = dict(lease_timeout=LEASE, renew_interval=0.1, renew_deadline=0.2,
                            frequent_interval=0.05, infrequent_interval=0.15, new_lock_wait=0)
STEP = 0.01


class Node:
    """An elector on the shared clock that records what its callbacks saw."""

    def __init__(self, clock: Clock, lock: str, name: str, commit: str = "callback",
                 **kw: Any) -> None:
        # commit: "callback" (on_transfer commits at once), "later" (the test
        # commits) or "none" (no on_transfer: this node never hands over).
        self.name = name
        self.log: List[Tuple[str, Any, ...]] = []  # type: ignore[misc]
        self.transfers: List[Tuple[str, int]] = []
        self.errors: List[s3lect.Error] = []
        self.events: List[s3lect.Event] = []
        cb: Dict[str, Any] = {}
        if commit != "none":
            cb["on_transfer"] = self._on_transfer
        self.commit = commit
        self.el = s3lect.Elector(
            lock, server_id=name, clock=clock, **FAST, **kw, **cb,
            on_acquire=lambda term: self.log.append(("acquired", term)),
            on_lose=lambda term, reason: self.log.append(("lost", term, reason)),
            on_error=self.errors.append, on_event=self.events.append)

    def _on_transfer(self, target: str, term: int) -> None:
        self.transfers.append((target, term))
        if self.commit == "callback":
            self.el.transfer_commit()

    def lost(self) -> List[s3lect.LostReason]:
        return [e[2] for e in self.log if e[0] == "lost"]


def advance_until(clock: Clock, cond: Any, limit: float, nodes: List[Node] = ()) -> float:
    """Advances in small steps until cond() holds (or limit virtual seconds
    passed); returns the virtual time it took. Checks at every step that no
    two of nodes lead at once."""
    t0 = clock.now
    while not cond() and clock.now - t0 < limit:
        clock.advance(STEP)
        assert sum(n.el.is_leader for n in nodes) <= 1, "two leaders at once"
    return clock.now - t0


def two_nodes(clock: Clock, lock: str, **kw: Any) -> Tuple[Node, Node]:
    """a leads; b has followed it for a few leases (a stable follower)."""
    a = Node(clock, lock, "a", **kw)
    a.el.start()
    clock.advance(0)
    assert a.el.is_leader
    b = Node(clock, lock, "b", **kw)
    b.el.start()
    advance_until(clock, lambda: False, 4 * LEASE, [a, b])
    assert a.el.is_leader and not b.el.is_leader
    return a, b


def stop_all(*nodes: Node) -> None:
    for n in nodes:
        n.el.stop()


def test_transfer_to_a_named_follower(s3lect_clock: Clock, mem_lock: str) -> None:
    a, b = two_nodes(s3lect_clock, mem_lock)
    try:
        term = a.el.term
        a.el.transfer("b")
        assert a.el.is_leader, "transfer() returns at once; the handover comes later"
        took = advance_until(s3lect_clock, lambda: b.el.is_leader, 5 * LEASE, [a, b])
        assert b.el.is_leader, "b did not lead after the transfer"
        # b is a stable follower: it sees the request at its next read
        # (infrequent_interval), confirms, and a sees that within a fast poll.
        assert took <= LEASE + 0.2, f"b led {took:.2f} s after the request"
        assert a.transfers == [("b", term)], "on_transfer named the target and the term"
        assert a.lost() == [s3lect.LostReason.TRANSFERRED] and a.lost()[0] == "transferred"
        assert b.el.term > term, f"b leads with term {b.el.term}, not above a's {term}"
        assert [e.type for e in a.events if e.type is s3lect.EventType.TRANSFER] == [
            s3lect.EventType.TRANSFER]
        ev = next(e for e in a.events if e.type is s3lect.EventType.TRANSFER)
        assert (ev.leader_id, ev.term) == ("b", term)
        # It stays with b.
        advance_until(s3lect_clock, lambda: False, 20 * LEASE, [a, b])
        assert b.el.is_leader and not a.el.is_leader
        assert a.errors == [] and b.errors == []
    finally:
        stop_all(a, b)


def test_commit_later_from_the_test_thread(s3lect_clock: Clock, mem_lock: str) -> None:
    a, b = two_nodes(s3lect_clock, mem_lock, commit="later")
    try:
        with pytest.raises(s3lect.StateError, match="no confirmed transfer"):
            a.el.transfer_commit()
        a.el.transfer()  # the best live follower: b
        advance_until(s3lect_clock, lambda: bool(a.transfers), 5 * LEASE, [a, b])
        assert a.transfers and a.transfers[0][0] == "b"
        # Not committed yet: a keeps leading, b waits.
        s3lect_clock.advance(0.1)
        assert a.el.is_leader and not b.el.is_leader and a.lost() == []
        a.el.transfer_commit()
        s3lect_clock.advance(0)  # the virtual clock runs the commit's step
        assert a.lost() == [s3lect.LostReason.TRANSFERRED] and not a.el.is_leader
        took = advance_until(s3lect_clock, lambda: b.el.is_leader, 5 * LEASE, [a, b])
        assert b.el.is_leader and took <= 0.1, f"b led {took:.2f} s after the commit"
    finally:
        stop_all(a, b)


def test_transfer_to_nobody_is_refused_and_the_leader_keeps_leading(
        s3lect_clock: Clock, mem_lock: str) -> None:
    a, b = two_nodes(s3lect_clock, mem_lock)
    try:
        term = a.el.term
        a.el.transfer("nobody")
        advance_until(s3lect_clock, lambda: bool(a.errors), 10 * LEASE, [a, b])
        assert a.errors, "no error event refused the transfer"
        assert "transfer refused" in str(a.errors[0]), str(a.errors[0])
        assert isinstance(a.errors[0], s3lect.Error)
        assert a.el.is_leader and a.el.term == term and a.transfers == [] and a.lost() == []
        advance_until(s3lect_clock, lambda: False, 10 * LEASE, [a, b])
        assert a.el.is_leader and a.el.term == term and not b.el.is_leader
        assert [e for e in b.log if e[0] == "acquired"] == []
    finally:
        stop_all(a, b)


def test_transfer_refusals(s3lect_clock: Clock, mem_lock: str) -> None:
    a, b = two_nodes(s3lect_clock, mem_lock)
    idle = s3lect.Elector(mem_lock, server_id="idle", clock=s3lect_clock, **FAST)
    try:
        with pytest.raises(s3lect.NotLeaderError, match="b does not lead") as ei:
            b.el.transfer("a")
        assert ei.value.code == s3lect._core.S3LECT_ENOTLEADER
        assert isinstance(ei.value, s3lect.StateError)
        with pytest.raises(s3lect.NotLeaderError):
            idle.transfer("a")  # never started
        with pytest.raises(s3lect.ConfigError):
            a.el.transfer("a")  # itself
        with pytest.raises(s3lect.ConfigError):
            a.el.transfer(42)  # type: ignore[arg-type]
        with pytest.raises(s3lect.StateError):
            b.el.transfer_commit()
        assert a.el.is_leader
    finally:
        idle.close()
        stop_all(a, b)
    with pytest.raises(s3lect.NotLeaderError):
        a.el.transfer("b")  # stopped


def test_without_on_transfer_the_leader_never_hands_over(
        s3lect_clock: Clock, mem_lock: str, caplog: pytest.LogCaptureFixture) -> None:
    # Nothing would stop a's leader work before b starts its own: a logs a
    # warning, the transfer is abandoned after its commit window, a leads on.
    a, b = two_nodes(s3lect_clock, mem_lock, commit="none")
    try:
        cfg = a.el.get_config()
        window = 2 * max(cfg["lease_timeout"], cfg["leader_hold"])
        term = a.el.term
        with caplog.at_level(logging.WARNING, logger="s3lect"):
            a.el.transfer("b")

            def asked() -> bool:
                return any(e.type is s3lect.EventType.TRANSFER for e in a.events)

            advance_until(s3lect_clock, asked, 5 * LEASE, [a, b])
            assert asked(), "b never confirmed: the test did not reach the commit step"
            warned = [r for r in caplog.records
                      if r.levelno == logging.WARNING and "on_transfer" in r.getMessage()]
            assert len(warned) == 1, [r.getMessage() for r in caplog.records]
            assert "not handed over" in warned[0].getMessage()
            assert "over to b," in warned[0].getMessage()
            # Through the commit window and past it: a leads at every step.
            t0 = s3lect_clock.now
            while not a.errors and s3lect_clock.now - t0 < window + 2 * LEASE:
                s3lect_clock.advance(STEP)
                assert a.el.is_leader and not b.el.is_leader, (
                    f"{s3lect_clock.now - t0:.2f} s after the confirmation")
            took = s3lect_clock.now - t0
            assert a.errors, "the transfer was never abandoned"
            assert "did not stop its leader work" in str(a.errors[0]), str(a.errors[0])
            assert window - STEP <= took <= window + 0.2, (
                f"abandoned {took:.2f} s after the confirmation, window {window:.2f} s")
            # Long after: still a, same term; b never led.
            advance_until(s3lect_clock, lambda: False, 10 * LEASE, [a, b])
        assert a.el.is_leader and a.el.term == term and a.lost() == [] and a.transfers == []
        assert not b.el.is_leader and [e for e in b.log if e[0] == "acquired"] == []
        assert len([r for r in caplog.records if "on_transfer" in r.getMessage()]) == 1
    finally:
        stop_all(a, b)


def test_priority_moves_leadership_to_the_preferred_node(s3lect_clock: Clock,
                                                         mem_lock: str) -> None:
    # a (priority 0) stops its work and commits in on_transfer.
    a = Node(s3lect_clock, mem_lock, "a")
    a.el.start()
    advance_until(s3lect_clock, lambda: False, 4 * LEASE, [a])
    assert a.el.is_leader
    b = Node(s3lect_clock, mem_lock, "b", priority=10)
    assert b.el.get_config()["priority"] == 10
    b.el.start()
    try:
        took = advance_until(s3lect_clock, lambda: b.el.is_leader, 10 * LEASE, [a, b])
        assert b.el.is_leader, "the node of priority 10 did not get the lock"
        # It asks once it has followed for a lease without a break.
        assert LEASE <= took <= 3 * LEASE, f"b led {took:.2f} s after it started"
        assert a.lost() == [s3lect.LostReason.TRANSFERRED]
        assert a.transfers and a.transfers[0][0] == "b", "on_transfer named the preferred node"
        advance_until(s3lect_clock, lambda: False, 30 * LEASE, [a, b])
        assert b.el.is_leader and a.lost() == [s3lect.LostReason.TRANSFERRED], "it keeps it"
    finally:
        stop_all(a, b)


def test_max_hold_rotates_leadership(s3lect_clock: Clock, mem_lock: str) -> None:
    a = Node(s3lect_clock, mem_lock, "a", max_hold=1.0)
    a.el.start()
    s3lect_clock.advance(0)
    b = Node(s3lect_clock, mem_lock, "b", max_hold=1.0)
    assert b.el.get_config()["max_hold"] == 1.0
    b.el.start()
    try:
        advance_until(s3lect_clock, lambda: False, 10.0, [a, b])
        handed = a.lost().count("transferred") + b.lost().count("transferred")
        # A tenure of a second (plus the confirmation): about 8 in 10 s.
        assert 5 <= handed <= 11, f"{handed} transfers in 10 s of 1 s tenure"
        assert a.transfers and b.transfers, "both led and handed over"
        assert a.el.is_leader or b.el.is_leader
    finally:
        stop_all(a, b)


def test_options_priority_is_a_count_and_max_hold_a_duration(mem_lock: str) -> None:
    el = s3lect.Elector(mem_lock, server_id="a", priority=7, max_hold=90)
    try:
        cfg = el.get_config()
        assert cfg["priority"] == 7 and type(cfg["priority"]) is int
        assert cfg["max_hold"] == 90.0
        with pytest.raises(s3lect.ConfigError, match="update_config"):
            el.update_config(priority=3)
    finally:
        el.close()
    for bad in (1.5, True, "3", -1):
        with pytest.raises(s3lect.ConfigError, match="priority"):
            s3lect.Elector(mem_lock, server_id="a", priority=bad)
    with pytest.raises(s3lect.ConfigError, match="priority"):
        s3lect.Elector(mem_lock, server_id="a", priority=1000001)
    env = s3lect.Elector.from_env(mem_lock, server_id="a",
                                  environ={"S3LECT_PRIORITY": "5", "S3LECT_MAX_HOLD": "1m"})
    try:
        assert (env.get_config()["priority"], env.get_config()["max_hold"]) == (5, 60.0)
    finally:
        env.close()
