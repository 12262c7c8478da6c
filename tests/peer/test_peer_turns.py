# SPDX-License-Identifier: Apache-2.0
"""Followers that take turns (issue 44 item 3; docs/algorithm.md "Followers").

Three `s3lect run` nodes as shipped (zero-config peer mode) on MinIO, every
peer port refused (each advertises an --addr where nothing listens, as
behind a firewall that REJECTs): the followers read the lock from the
store, and take turns through the roster object next to it. Each node
talks to MinIO through its own proxy, which notes when it sends a GET of
the lock. Checks: the two followers are in the roster half an interval
apart, their reads of the lock interleave (no gap longer than three
quarters of an interval; at independent random phases the widest gap is
most of one), a SIGTERM handover is seen within the turn, the new leader
leaves the roster and the restarted node joins, and a follower makes no
more requests than one read per frequent interval.
"""
from __future__ import annotations

import json
import os
import re
import signal
import threading
import time

import pytest

from harness.cli import Node
from harness.countproxy import CountingProxy
from harness.wait import wait_for
from harness.servers import free_port

FREQUENT_MS = 1000
EVERY_MS = FREQUENT_MS * 120 // 118  # the members' stretched period
TIMING = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", f"{FREQUENT_MS}ms", "--infrequent-interval", "2s"]


class TimingProxy(CountingProxy):
    """Counts requests by method and object (lock or roster) and notes the
    monotonic time of each GET of the lock."""

    def __init__(self, host, port, lock_path):
        self.lock_path = lock_path
        self.lock_gets: list[float] = []
        self.mu = threading.Lock()
        super().__init__(host, port)

    def key(self, method, path, headers):
        path = path.split("?", 1)[0]
        what = "roster" if path.endswith(".s3lect-roster") else (
            "lock" if path == self.lock_path else "other")
        if what == "lock" and method == "GET":
            with self.mu:
                self.lock_gets.append(time.monotonic())
        return f"{method} {what}"

    def gets_between(self, t0, t1):
        with self.mu:
            return [t for t in self.lock_gets if t0 <= t <= t1]


def start_node(bin_, tmp, minio, lock, lock_path, node_id) -> Node:
    """A harness Node talking to MinIO through its own TimingProxy, its
    advertised peer address refused (nothing listens there)."""
    proxy = TimingProxy("127.0.0.1", int(minio.endpoint.rsplit(":", 1)[1]), lock_path)
    env = dict(os.environ, **minio.env())
    env.pop("AWS_ENDPOINT_URL_S3", None)
    env.pop("AWS_ENDPOINT_URL", None)
    node = Node(bin_, tmp, lock, node_id, env,
                extra=["--endpoint", proxy.endpoint, "--addr", f"127.0.0.1:{free_port()}",
                       "--peer-listen", f"127.0.0.1:{free_port()}", *TIMING])
    node.proxy = proxy
    return node


@pytest.fixture
def cluster(s3lect_bin, minio, tmp_path, request):
    nodes: dict[str, Node] = {}
    started: list[Node] = []
    key = f"turns/{re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name)}.json"
    lock = f"s3://{minio.bucket}/{key}"
    client = minio.client()

    def start(nid):
        if nid in nodes:
            nodes[nid].stop()
        nodes[nid] = start_node(s3lect_bin, tmp_path, minio, lock, f"/{minio.bucket}/{key}", nid)
        started.append(nodes[nid])
        return nodes[nid]

    def roster():
        r = client.get(minio.bucket, key + ".s3lect-roster")
        return json.loads(r.body) if r.status == 200 else None

    start.nodes = nodes
    start.roster = roster
    yield start
    for n in started:
        n.stop()
        n.proxy.close()


def leader_of(nodes):
    ls = [n for n in nodes.values() if n.leading()]
    return ls[0] if len(ls) == 1 else None


def two_members(roster, follower_ids):
    r = roster()
    return r is not None and sorted(m["id"] for m in r["members"]) == sorted(follower_ids)


def test_firewalled_followers_take_turns(cluster):
    for nid in ("t0", "t1", "t2"):
        cluster(nid)
        time.sleep(0.3)
    nodes = cluster.nodes
    wait_for(lambda: leader_of(nodes) is not None, 20, "a leader")
    leader = leader_of(nodes)
    followers = [n for n in nodes.values() if n is not leader]
    wait_for(lambda: two_members(cluster.roster, [f.id for f in followers]), 20,
             "both followers in the roster")
    members = cluster.roster()["members"]
    fr = sorted(m["phase"] / m["every"] for m in members)
    assert 0.4 <= fr[1] - fr[0] <= 0.6, f"half an interval apart: {members}"
    assert all(m["every"] == EVERY_MS for m in members), members

    # Their reads of the lock interleave: over 8 s, no gap between two
    # consecutive reads (of either follower) longer than 3/4 of an interval.
    time.sleep(1.5)
    t0 = time.monotonic()
    counts0 = {f.id: f.proxy.snapshot() for f in followers}
    time.sleep(8)
    t1 = time.monotonic()
    reads = sorted(t for f in followers for t in f.proxy.gets_between(t0, t1))
    gaps = [b - a for a, b in zip(reads, reads[1:])]
    assert len(reads) >= 12, f"both followers read the lock: {len(reads)} reads in 8 s"
    assert max(gaps) <= 0.75 * EVERY_MS / 1000, (
        f"reads interleave: widest gap {max(gaps):.3f} s, gaps {[round(g, 3) for g in gaps]}")
    for f in followers:
        c = f.proxy.snapshot() - counts0[f.id]
        total = sum(c.values())
        assert total <= 8 + 1, f"{f.id}: one request per interval at most: {dict(c)}"

    # SIGTERM handovers: the release is read within the turn.
    took = []
    for trial in range(4):
        leader = leader_of(nodes)
        assert leader is not None, "one leader"
        time.sleep(0.137 * (trial + 1))  # a moment in no particular phase
        others = [n for n in nodes.values() if n is not leader]
        before = {n.id: n.text().count("acquired leadership") for n in others}
        s = time.monotonic()
        leader.proc.send_signal(signal.SIGTERM)
        new = None
        deadline = s + 10
        while new is None and time.monotonic() < deadline:
            for n in others:
                if n.text().count("acquired leadership") > before[n.id]:
                    new = n
            time.sleep(0.005)
        assert new is not None, "a follower took over"
        took.append(time.monotonic() - s)
        assert leader.proc.wait(timeout=10) == 0
        cluster(leader.id)  # starts again, with a new incarnation
        rest = [n.id for n in nodes.values() if n is not new]
        wait_for(lambda: two_members(cluster.roster, rest), 20,
                 "the new leader left the roster and the restarted node joined")
        time.sleep(1.5)
    assert max(took) <= 1.2, f"handovers within the turn (+ the release): {took}"


def test_a_foreign_object_at_the_roster_key_is_left_alone(cluster, minio):
    """Something else at KEY.s3lect-roster: never overwritten; each follower
    says so once and still follows (and takes over on a release)."""
    client = minio.client()
    name = "turns/test_a_foreign_object_at_the_roster_key_is_left_alone.json"
    foreign = b'{"not":"a roster"}'
    assert client.put(minio.bucket, name + ".s3lect-roster", foreign).status == 200
    for nid in ("f0", "f1", "f2"):
        cluster(nid)
        time.sleep(0.3)
    nodes = cluster.nodes
    wait_for(lambda: leader_of(nodes) is not None, 20, "a leader")
    leader = leader_of(nodes)
    followers = [n for n in nodes.values() if n is not leader]
    wait_for(lambda: all("followers' roster" in f.text() for f in followers), 20,
             "each follower's line about the roster")
    time.sleep(3)
    assert client.get(minio.bucket, name + ".s3lect-roster").body == foreign, "left alone"
    for f in followers:
        lines = [l for l in f.text().splitlines() if "followers' roster" in l]
        assert len(lines) == 1 and "holds something else" in lines[0], lines
        assert "SIGNATURE" not in lines[0] and "Credential=" not in lines[0], lines[0]
    leader.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: any(f.leading() for f in followers), 10, "a follower to take over")
