# SPDX-License-Identifier: Apache-2.0
"""Elections between electors in one process, against MinIO."""

from __future__ import annotations

import threading
import time

import s3lect
from pyutil import wait_until


def leaders(els):
    return [e for e in els if e.is_leader]


def test_three_electors_elect_exactly_one_leader(electors, s3_lock, s3_settings):
    els = [electors(s3_lock, server_id=f"node-{i}", **s3_settings) for i in range(3)]
    for e in els:
        e.start()
    first = wait_until(lambda: leaders(els), 20, "one of three electors to lead")
    assert len(first) == 1, f"two leaders at once: {[e.server_id for e in first]}"
    leader = first[0]
    # Watch for a while (several lease periods): never two leaders at once.
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        now = leaders(els)
        assert len(now) <= 1, f"two leaders at once: {[e.server_id for e in now]}"
        time.sleep(0.02)
    assert leader.is_leader, "the leader lost leadership while nothing disturbed it"
    # Every follower learns who leads, and the same term.
    wait_until(lambda: all(e.leader_id == leader.server_id for e in els), 10,
               "all electors to report the same leader_id")
    assert {e.term for e in els} == {leader.term}
    assert leader.term >= 1


def test_graceful_stop_hands_over_before_lease_expiry(electors, s3_lock, s3_settings):
    # A long lease: a handover faster than it proves that stop() released the lock.
    lost = []
    lease = 20.0
    a = electors(s3_lock, server_id="a", lease_timeout=lease, renew_deadline=3.0,
                 on_lose=lambda term, reason: lost.append((term, reason)), **s3_settings)
    a.start()
    assert a.wait_for_leadership(timeout=15), "first elector did not lead an empty lock"
    term_a = a.term
    b = electors(s3_lock, server_id="b", lease_timeout=lease, renew_deadline=3.0, **s3_settings)
    b.start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a as leader")
    t0 = time.monotonic()
    a.stop()
    assert lost == [(term_a, s3lect.LostReason.STOPPED)], f"on_lose calls: {lost}"
    assert not a.is_leader
    assert b.wait_for_leadership(timeout=lease / 2), "b did not take over after a released the lock"
    took = time.monotonic() - t0
    assert took < lease / 2, f"handover took {took:.1f} s: the lock was not released"
    assert b.term == term_a + 1, f"term after handover {b.term}, before {term_a}"


def test_stop_without_release_waits_for_lease(electors, s3_lock, s3_settings):
    lease = 3.0
    a = electors(s3_lock, server_id="a", **s3_settings)
    a.start()
    assert a.wait_for_leadership(timeout=15)
    term_a = a.term
    b = electors(s3_lock, server_id="b", **s3_settings)
    b.start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a as leader")
    t0 = time.monotonic()
    a.stop(release=False)  # as if a crashed
    assert b.wait_for_leadership(timeout=30), "b never took over an abandoned lock"
    took = time.monotonic() - t0
    # b saw a's last renewal at most renew_interval (0.5 s) before the stop.
    assert took >= lease - 0.5 - 0.3, f"b took over after {took:.2f} s, before the lease expired"
    assert b.term == term_a + 1, f"term after takeover {b.term}, before {term_a}"


def test_file_lock_works_too(electors, tmp_path):
    lock = f"file://{tmp_path}/leader.json"
    a = electors(lock, server_id="a")
    b = electors(lock, server_id="b")
    a.start()
    assert a.wait_for_leadership(timeout=10)
    b.start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a via the file store")
    assert not b.is_leader
    a.stop()
    assert b.wait_for_leadership(timeout=10)


def test_concurrent_getters_while_running(electors, s3_lock, s3_settings):
    el = electors(s3_lock, server_id="x", **s3_settings)
    el.start()
    errors = []

    def hammer():
        try:
            end = time.monotonic() + 2
            while time.monotonic() < end:
                el.is_leader, el.term, el.leader_id, el.cycle
                el.status()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    ts = [threading.Thread(target=hammer) for _ in range(4)]
    for t in ts:
        t.start()
    assert el.wait_for_leadership(timeout=15)
    for t in ts:
        t.join()
    assert errors == []


def test_a_new_lock_is_created_after_new_lock_wait(electors, tmp_path):
    """The default new_lock_wait (one lease): an elector that has never seen
    the lock waits it out before creating a missing one (it may have been
    deleted under a leader still running), and says why in its status; the
    lock's first term is its clock in ms. new_lock_wait=0 creates at once."""
    lock = f"file://{tmp_path}/new.json"
    el = electors(lock, server_id="first", new_lock_wait=None)  # the default: lease_timeout 3 s
    t0 = time.monotonic()
    el.start()
    time.sleep(2.0)
    assert not el.is_leader, "created a missing lock it never saw before new_lock_wait"
    assert "new_lock_wait" in (el.status().last_error or ""), el.status()
    assert el.wait_for_leadership(timeout=10), "never created the lock after new_lock_wait"
    took = time.monotonic() - t0
    assert 3.0 - 0.2 <= took <= 3.0 + 5, f"led {took:.2f} s after start"
    assert abs(el.term / 1000 - time.time()) < 600, f"term {el.term} is not the clock in ms"
    other = electors(f"file://{tmp_path}/other.json", server_id="at-once", new_lock_wait=0)
    t0 = time.monotonic()
    other.start()
    assert other.wait_for_leadership(timeout=5)
    assert time.monotonic() - t0 < 2.0
