# SPDX-License-Identifier: Apache-2.0
"""Elections between separate processes (tests/python/elector_proc.py), against MinIO."""

from __future__ import annotations

import signal
import time

import pytest

from pyutil import wait_until


def leading(procs):
    return [p for p in procs if p.is_leading()]


def test_three_processes_elect_one_leader(spawn, s3_lock):
    procs = [spawn(s3_lock, f"proc-{i}") for i in range(3)]
    first = wait_until(lambda: leading(procs), 30, "one of three processes to lead")
    assert len(first) == 1, f"several processes lead: {[p.pid for p in first]}"
    leader = first[0]
    term = leader.find("acquired")[-1]["term"]
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        now = leading(procs)
        assert len(now) <= 1, f"two processes lead at once: {[p.pid for p in now]}"
        time.sleep(0.05)
    assert leading(procs) == [leader], "leadership moved while nothing disturbed it"
    # Every follower saw the same leader with the same term.
    for p in procs:
        if p is not leader:
            p.wait_event("leader_changed", 15, lambda e: e["term"] == term)


def test_kill9_of_leader_fails_over_with_higher_term(spawn, s3_lock):
    procs = [spawn(s3_lock, f"proc-{i}") for i in range(3)]
    leader = wait_until(lambda: leading(procs), 30, "a leader among three processes")[0]
    old_term = leader.find("acquired")[-1]["term"]
    for p in procs:
        if p is not leader:
            p.wait_event("leader_changed", 15, lambda e: e["term"] == old_term)
    t0 = time.monotonic()
    leader.signal(signal.SIGKILL)
    assert leader.wait(10) == -signal.SIGKILL
    rest = [p for p in procs if p is not leader]
    new = wait_until(lambda: leading(rest), 30, "a survivor to take over after kill -9")
    took = time.monotonic() - t0
    assert len(new) == 1, "two survivors lead at once"
    new_term = new[0].find("acquired")[-1]["term"]
    assert new_term > old_term, f"new leader's term {new_term} not above the dead one's {old_term}"
    # lease 3 s + poll 0.5 s; generous for a loaded machine, but far below "never".
    assert took < 20, f"failover took {took:.1f} s"


def test_sigterm_hands_over_gracefully(spawn, s3_lock, child_env):
    env = dict(child_env, S3LECT_LEASE_TIMEOUT="20s", S3LECT_RENEW_DEADLINE="3s")
    a = spawn(s3_lock, "a", env=env)
    a.wait_event("acquired", 30)
    b = spawn(s3_lock, "b", env=env)
    b.wait_event("leader_changed", 15, lambda e: e["leader_id"] == "a")
    t0 = time.monotonic()
    a.signal(signal.SIGTERM)
    assert a.wait(15) == 0, "the leader did not exit cleanly on SIGTERM"
    lost = a.find("lost")
    assert lost and lost[-1]["reason"] == "stopped", f"leader's lost events: {lost}"
    b.wait_event("acquired", 10)
    took = time.monotonic() - t0
    assert took < 10, f"handover took {took:.1f} s (lease is 20 s): lock not released"
    assert b.find("acquired")[-1]["term"] == a.find("acquired")[-1]["term"] + 1


@pytest.mark.parametrize("mode", ["exit", "drop"])
def test_process_exit_without_stop_releases_and_does_not_hang(spawn, s3_lock, child_env, mode):
    """An Elector that is never stopped (left to atexit, or garbage collected
    on another thread) must neither hang interpreter exit nor keep the lock."""
    env = dict(child_env, S3LECT_LEASE_TIMEOUT="20s", S3LECT_RENEW_DEADLINE="3s")
    a = spawn(s3_lock, "a", mode, env=env)
    a.wait_event("acquired", 30)
    c = spawn(s3_lock, "c", env=env)
    c.wait_event("leader_changed", 15, lambda e: e["leader_id"] == "a")
    t0 = time.monotonic()
    a.signal(signal.SIGTERM)  # a returns from main without calling stop()
    rc = a.wait(20)  # hanging here is the failure
    assert rc == 0, f"process exited with {rc}; stderr: {''.join(a.stderr)[-2000:]}"
    kinds = [e["event"] for e in a.events]
    assert "lost" in kinds, f"the elector was not stopped: {a.events}"
    assert a.find("lost")[-1]["reason"] == "stopped"
    if mode == "drop":
        # Collected (and so stopped) on the dropping thread, not later by atexit.
        assert "dropped" in kinds and kinds.index("lost") < kinds.index("dropped"), a.events
    c.wait_event("acquired", 10)
    took = time.monotonic() - t0
    assert took < 10, f"takeover took {took:.1f} s (lease 20 s): exit did not release the lock"
