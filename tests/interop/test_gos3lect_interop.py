# SPDX-License-Identifier: Apache-2.0
"""Go s3lect and s3lect on one lock (issue 18): one Go s3lect node
(bench/peers/gos3lect) and two `s3lect run` nodes on MinIO.

Checked: leadership passes both ways (a Go leader taken over by ours and ours
by Go) after kill -9 and after SIGTERM, over several rounds; never two
leaders by the nodes' own stamped lines; the leader's id in the MinIO record;
each side names the other's leader; Go's resignation record (leader id kept,
zero time) and our release record are taken over well before a lease; peer
mode across implementations (a Go follower served by our leader's endpoint
makes no S3 request; our follower of a Go leader takes over at its death and
reads S3 at its stable period, not twice per Go renewal); our term stays
above any term the node saw across a Go leader. Timings in interop_cluster.py
(lease 6 s, renew 1 s). Skips, saying why, without a Go s3lect checkout in
GOS3LECT_SRC.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from harness.wait import wait_for
from interop_cluster import C_INFREQUENT, GO_FREQUENT, LEASE, free_port, peer_flags

ZERO_TIME = "0001-01-01T00:00:00Z"
# A released record is taken over at the other side's next read.
PROMPT = max(GO_FREQUENT, C_INFREQUENT) + 2.0
# kill -9: the record must look dead for a lease, then one poll.
FAILOVER_MAX = LEASE + max(GO_FREQUENT, C_INFREQUENT) + 2.5
# ...and nobody may take over a lease that was renewed less than a renew
# interval (1 s) before the kill.
FAILOVER_MIN = LEASE - 1.5


def acquired_after(node, t0: float) -> float | None:
    for t, kind, _ in node.events():
        if kind == "acquired" and t >= t0:
            return t
    return None


def settle(c, leader, timeout: float = 20.0) -> None:
    """Waits until every other live node names `leader` and the record holds it."""
    others = [n for n in c.nodes if n is not leader and n.alive() and n.end is None]
    wait_for(lambda: all(n.follows() == leader.id for n in others), timeout,
             f"{[n.id for n in others]} to name {leader.id} as leader\n{c.describe()}")
    rec = c.record()
    assert rec["leaderID"] == leader.id, f"record names {rec['leaderID']!r}, {leader.id} leads"
    assert rec["lastUpdated"] != ZERO_TIME


def test_leadership_passes_both_ways(cluster):
    c = cluster()
    seq = {"go": 1, "c": 0}

    def start(kind):
        seq[kind] += 1
        return (c.start_go if kind == "go" else c.start_c)(f"{kind}{seq[kind]}")

    g = c.start_go("go1")
    wait_for(g.leading, 20, "the Go node to lead an empty lock")
    start("c"), start("c")
    settle(c, g)

    # (signal, direction): kill -9 and SIGTERM, Go→ours and ours→Go, twice.
    rounds = [("kill", "go"), ("kill", "c"), ("term", "go"), ("term", "c")] * 2
    results = []
    for how, old_kind in rounds:
        old = c.one_leader()
        assert old is not None, f"one leader before the round\n{c.describe()}"
        # Rounds alternate, so the previous round's winner is this one's leader.
        assert old.kind == old_kind, f"{old.id} leads, a {old_kind} leader was expected"
        new_kind = "c" if old_kind == "go" else "go"
        stopped = []
        if new_kind == "go":
            # The Go node must win: the other s3lect node sits this round out.
            for n in c.nodes:
                if n.kind == "c" and n is not old and n.alive() and n.end is None:
                    assert n.sigterm() == 0, f"{n.id} (a follower) exited non-zero on SIGTERM"
                    stopped.append(n)
        t0 = time.monotonic()
        if how == "kill":
            old.kill9()
        else:
            rc = old.sigterm()
            assert rc == 0, f"{old.id} exited {rc} on SIGTERM\n{old.text()}"
        new = wait_for(lambda: c.one_leader(), FAILOVER_MAX + 5,
                       f"a new leader after {how} of {old.id}\n{c.describe()}")
        took = acquired_after(new, t0) - t0
        assert new.kind == new_kind, f"{new.id} took over; a {new_kind} node was expected"
        results.append((how, old.id, new.id, took))
        if how == "kill":
            assert FAILOVER_MIN <= took <= FAILOVER_MAX, (
                f"{new.id} took over {took:.2f} s after kill -9 of {old.id}; expected "
                f"{FAILOVER_MIN:g}–{FAILOVER_MAX:g} s\n{c.describe()}")
        else:
            assert took <= PROMPT, (
                f"{new.id} took {took:.2f} s over the record {old.id} gave up on SIGTERM "
                f"(at most {PROMPT:g} s; a lease is {LEASE:g} s)\n{c.describe()}")
        # Replace what was stopped, with new ids, and let everybody agree.
        start(old_kind)
        for _ in stopped:
            start("c")
        settle(c, new)
        c.assert_never_two_leaders()

    c.assert_never_two_leaders()
    # Both sides named the other's leader at some point.
    go_named = {e[2][0] for n in c.nodes if n.kind == "go" for e in n.events()
                if e[1] == "leader_is"}
    c_named = {e[2][0] for n in c.nodes if n.kind == "c" for e in n.events()
               if e[1] == "leader_is"}
    assert any(i.startswith("c") for i in go_named), f"Go nodes named only {go_named}"
    assert any(i.startswith("go") for i in c_named), f"our nodes named only {c_named}"
    print("\ninterop rounds (signal, old leader, new leader, seconds):")
    for r in results:
        print(f"  {r[0]:4} {r[1]:>4} -> {r[2]:<4} {r[3]:.2f}")


def test_go_resignation_record_is_taken_over_by_ours(cluster):
    c = cluster()
    g = c.start_go("go1")
    wait_for(g.leading, 20, "the Go node to lead")
    assert g.sigterm() == 0
    rec = c.record()
    # Go s3lect's resignLeadership keeps leaderID and zeroes lastUpdated.
    assert rec["leaderID"] == "go1", rec
    assert rec["lastUpdated"] == ZERO_TIME, rec
    t0 = time.monotonic()
    n = c.start_c("c1")
    wait_for(n.leading, PROMPT, f"our node to take the resigned record at once\n{n.text()}")
    took = time.monotonic() - t0
    assert took < LEASE - 1, f"took {took:.2f} s: waited for the lease, not a free record"
    assert c.record()["leaderID"] == "c1"


def test_our_release_record_is_taken_over_by_go(cluster):
    c = cluster()
    n = c.start_c("c1")
    wait_for(n.leading, 20, "our node to lead")
    assert n.sigterm() == 0
    rec = c.record()
    assert rec["leaderID"] == "" and rec["lastUpdated"] == ZERO_TIME, rec
    assert rec.get("term", 0) >= 1, rec
    t0 = time.monotonic()
    g = c.start_go("go1")
    wait_for(g.leading, PROMPT, f"the Go node to take the released record at once\n{g.text()}")
    assert time.monotonic() - t0 < LEASE - 1
    assert c.record()["leaderID"] == "go1"


def _term_after_go_leader(cluster) -> tuple[int, int, str]:
    """Ours leads at term T and another of ours follows it; Go takes over
    (that follower paused meanwhile); when Go dies the follower, which saw T,
    takes over. Returns (T, its new term, its log)."""
    c = cluster()
    c1 = c.start_c("c1")
    wait_for(c1.leading, 20, "c1 to lead")
    c2 = c.start_c("c2")
    settle(c, c1)
    assert c1.sigterm() == 0
    wait_for(c2.leading, PROMPT + 2, "c2 to take over c1's release")
    high = [int(e[2][0]) for e in c2.events() if e[1] == "acquired"][-1]
    c3 = c.start_c("c3")
    g = c.start_go("go1")
    settle(c, c2)
    os.killpg(c3.proc.pid, signal.SIGSTOP)
    try:
        c2.kill9()
        wait_for(g.leading, FAILOVER_MAX + 5, f"Go to take over from c2\n{c.describe()}")
    finally:
        os.killpg(c3.proc.pid, signal.SIGCONT)
    settle(c, g)
    t0 = time.monotonic()
    g.kill9()
    wait_for(lambda: acquired_after(c3, t0), FAILOVER_MAX + 5, f"c3 to take over\n{c.describe()}")
    c.assert_never_two_leaders()
    new = [int(e[2][0]) for e in c3.events() if e[1] == "acquired"][-1]
    return high, new, c.describe()


def test_term_does_not_go_backwards_across_a_go_leader(cluster):
    # Go s3lect drops `term` on every write; a node of ours that saw term T
    # must still lead above T after a Go leader (as far as a node can know:
    # a node that never saw T cannot).
    high, new, log = _term_after_go_leader(cluster)
    assert new > high, f"our node saw term {high}, then led a Go leader's lock at term {new}\n{log}"
    print(f"\nterm before the Go leader {high}, after it {new}")


@pytest.mark.parametrize("how", ["term", "kill"])
def test_go_follower_of_our_peer_leader(cluster, pki, how):
    c = cluster()
    ours = c.start_c("c1", extra=peer_flags(pki, free_port()))
    wait_for(ours.leading, 20, "our peer-mode node to lead")
    g = c.start_go("go1", extra=peer_flags(pki, free_port()))
    settle(c, ours)
    time.sleep(2 * GO_FREQUENT)
    before = g.proxy.snapshot()
    window = 8.0
    time.sleep(window)
    d = g.proxy.snapshot() - before
    assert ours.leading() and g.follows() == "c1"
    # Go's follower checks the leader's /health/leadership (our endpoint)
    # instead of S3 every cycle.
    assert sum(d.values()) == 0, f"the Go follower made {dict(d)} S3 requests in {window:g} s"
    t0 = time.monotonic()
    if how == "term":
        assert ours.sigterm() == 0
        # Our endpoint says 404; Go retries it (twice at once, once after
        # 1 s), then reads the released record from S3.
        wait_for(g.leading, PROMPT + 2, f"Go to take over our release\n{c.describe()}")
        assert acquired_after(g, t0) - t0 < LEASE - 1
    else:
        ours.kill9()
        wait_for(g.leading, FAILOVER_MAX + 5, f"Go to take over\n{c.describe()}")
        took = acquired_after(g, t0) - t0
        assert FAILOVER_MIN <= took <= FAILOVER_MAX + 1, f"took over after {took:.2f} s"
    c.assert_never_two_leaders()


@pytest.mark.parametrize("how", ["kill", "term"])
def test_our_follower_of_a_go_peer_leader(cluster, pki, how):
    c = cluster()
    g = c.start_go("go1", extra=peer_flags(pki, free_port()))
    wait_for(g.leading, 20, "the Go peer-mode node to lead")
    ours = c.start_c("c1", extra=peer_flags(pki, free_port()))
    settle(c, g)
    time.sleep(3)
    assert g.leading() and ours.follows() == "go1", c.describe()
    t0 = time.monotonic()
    if how == "kill":
        g.kill9()
        wait_for(ours.leading, FAILOVER_MAX + 5, f"our node to take over\n{c.describe()}")
        took = acquired_after(ours, t0) - t0
        assert FAILOVER_MIN <= took <= FAILOVER_MAX, f"took over after {took:.2f} s"
    else:
        # Go's resignation record is read from S3 at our stable period.
        assert g.sigterm() == 0
        wait_for(ours.leading, PROMPT + 2, f"our node to take Go's resignation\n{c.describe()}")
        assert acquired_after(ours, t0) - t0 < LEASE - 1
    c.assert_never_two_leaders()


def test_our_peer_follower_of_a_go_leader_settles(cluster, pki):
    # Go's endpoint answers without an etag: our follower then follows that
    # leader through S3 at its stable period, not with two reads per Go
    # renewal (c1347eb).
    c = cluster()
    g = c.start_go("go1", extra=peer_flags(pki, free_port()))
    wait_for(g.leading, 20, "the Go peer-mode node to lead")
    timing = ["--lease-timeout", "6s", "--renew-interval", "1s", "--renew-deadline", "3s",
              "--frequent-interval", "500ms", "--infrequent-interval", "4s"]
    ours = c.start_c("c1", extra=peer_flags(pki, free_port()), timing=timing)
    settle(c, g)
    time.sleep(4)
    before = ours.proxy.snapshot()
    window = 12.0
    time.sleep(window)
    d = ours.proxy.snapshot() - before
    assert g.leading() and ours.follows() == "go1"
    limit = window / 4.0 + 2
    assert d["GET"] <= limit, (f"our follower made {d['GET']} GETs in {window:g} s of a stable "
                               f"Go leader (infrequent 4 s: at most {limit:g})")
    print(f"\nour peer follower of a Go leader: {dict(d)} S3 requests in {window:g} s")


@pytest.mark.parametrize("args, why", [
    (["--lock", "s3://b/k"], "--id is required"),
    (["--lock", "b/k", "--id", "x"], "--lock must be s3://BUCKET/KEY"),
    (["--lock", "s3://b/k", "--id", "x", "--peer", "--addr", "127.0.0.1:1"],
     "--peer needs --addr, --peer-cert and --peer-key"),
    (["--lock", "s3://b/k", "--id", "x", "extra"], 'unexpected argument "extra"'),
])
def test_node_program_refuses_bad_flags(gonode, args, why):
    r = subprocess.run([str(gonode), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    assert why in r.stderr, r.stderr
