# SPDX-License-Identifier: Apache-2.0
"""A follower counts a dead leader's lease from the write, by the store's
clock (issue 28 item 3; docs/algorithm.md, "The store's clock").

A leader on MinIO is killed with -9; a fresh follower starts 5 s later, so
its first read returns a record already about 5 s old by MinIO's clock
(Date against Last-Modified, whole seconds). Before, the follower counted
the lease from that first read: it took over at kill + 5 s + L at the
earliest. Now it backdates the first sight by the age less one second
(never more than L − renew_deadline): it takes over about L after the
leader's last write — and never before it. The bounds are generous (a
second either side of the expected); the old behaviour misses the upper
one by at least two seconds. Every process started is stopped.
"""
from __future__ import annotations

import re
import secrets
import time

import pytest

from harness.cli import Node, wait_for

LEASE_S = 8.0
RENEW_S = 1.0
DEADLINE_S = 3.0  # margin L − D = 5 s: the largest credit
WAIT_S = 5.0  # from the kill to the follower's start
TIMING = ["--lease-timeout", f"{LEASE_S:g}s", "--renew-interval", f"{RENEW_S:g}s",
          "--renew-deadline", f"{DEADLINE_S:g}s", "--frequent-interval", "500ms",
          "--infrequent-interval", "1s", "--max-clock-skew", "0"]


@pytest.fixture
def s3env(minio, clean_env):
    env = dict(clean_env)
    env.update(minio.env())
    return env


def acquired(node: Node) -> bool:
    return re.search(r"s3lect: acquired leadership", node.text()) is not None


def test_takeover_counts_from_the_write(s3lect_bin, tmp_path, s3env, minio):
    lock = f"s3://{minio.bucket}/cli/store-clock-{secrets.token_hex(4)}.json"
    a = Node(s3lect_bin, tmp_path, lock, "a", s3env, extra=TIMING)
    b = None
    try:
        wait_for(a.leading, 20, "a to lead")
        time.sleep(2 * RENEW_S)  # a few renewals: the record is a renewal
        a.kill9()
        killed = time.monotonic()  # a's last write was sent at most RENEW_S before this
        time.sleep(WAIT_S)
        b = Node(s3lect_bin, tmp_path, lock, "b", s3env, extra=TIMING)
        wait_for(lambda: acquired(b), WAIT_S + LEASE_S + 15, "b to take over")
        took = time.monotonic() - killed
        # Never before a's last write + L (the write was at most a renew
        # interval and a request before the kill).
        assert took >= LEASE_S - RENEW_S - 0.5, (took, b.text())
        # About L after the write, not L after b's first read (>= WAIT_S + L).
        assert took <= LEASE_S + 2.5, (
            f"b took over {took:.2f} s after the kill: the lease was counted from its first "
            f"read ({WAIT_S + LEASE_S:g} s), not from the write by the store's clock", b.text())
    finally:
        a.stop()
        if b:
            b.stop()


# ---- issue 38 item 2: a store clock that runs ahead never costs the kill deadline ----

# Both nodes at s3lect run's default kill timeout (the largest safe one:
# L - D - margin = 4.734 s here), so the records announce holdMs = L.
SKEW_TIMING = ["--lease-timeout", "8s", "--renew-interval", "1s", "--renew-deadline", "3s",
               "--frequent-interval", "500ms", "--infrequent-interval", "1s", "--no-peer"]
# The command ignores SIGTERM (slow to stop) and beats every 20 ms with the
# monotonic clock every process on this machine shares.
SLOW_CMD = ("import os, signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "f = open(sys.argv[1], 'a', buffering=1)\n"
            "f.write('start %s %.4f\\n' % (os.environ['S3LECT_LEADER_ID'], time.monotonic()))\n"
            "while True:\n"
            "    f.write('hb %s %.4f\\n' % (os.environ['S3LECT_LEADER_ID'], time.monotonic()))\n"
            "    time.sleep(0.02)\n")


@pytest.mark.parametrize("ahead_s", [3, 30, 3600])
def test_date_ahead_never_starts_a_command_before_the_kill_deadline(
        ahead_s, s3lect_bin, tmp_path, s3env, minio):
    """The follower's answers carry a Date `ahead_s` ahead of Last-Modified
    (a proxy rewrites it); the leader is cut off from the store without a
    reset while its command ignores SIGTERM, so it runs until the hard
    deadline. Before issue 38 the follower credited the record's apparent
    age up to L - renew_deadline (5 s) and started its command while the old
    one still ran (2.3-4.4 s of two commands in the hostile runs); now the
    records' holdMs (= L at the default kill timeout) leaves no credit."""
    import os
    import subprocess
    import sys
    from urllib.parse import urlparse

    from harness.dateproxy import DateProxy

    up = urlparse(minio.endpoint)
    pa = DateProxy(up.hostname, up.port)  # the leader's: cut later
    pb = DateProxy(up.hostname, up.port, date_ahead_s=ahead_s)  # the follower's
    lock = f"s3://{minio.bucket}/cli/date-ahead-{secrets.token_hex(4)}.json"
    beats = tmp_path / "beats.log"
    procs: list[subprocess.Popen] = []

    def node(nid: str, proxy: DateProxy) -> subprocess.Popen:
        env = dict(s3env)
        env["AWS_ENDPOINT_URL_S3"] = proxy.endpoint
        p = subprocess.Popen(
            [str(s3lect_bin), "run", "--lock", lock, "--id", nid, *SKEW_TIMING, "--",
             sys.executable, "-c", SLOW_CMD, str(beats)],
            stdout=open(tmp_path / f"{nid}.log", "w"), stderr=subprocess.STDOUT, env=env,
            start_new_session=True)
        procs.append(p)
        return p

    def lines() -> list[tuple[str, str, float]]:
        out = []
        for ln in beats.read_text().splitlines() if beats.exists() else []:
            parts = ln.split()
            if len(parts) == 3:
                out.append((parts[0], parts[1], float(parts[2])))
        return out

    try:
        node("a", pa)
        wait_for(lambda: any(k == "start" and n == "a" for k, n, _ in lines()), 20, "a's command")
        node("b", pb)
        wait_for(lambda: pb.answers >= 3, 20, "b to read the lock through its proxy")
        time.sleep(2)  # b has seen a renewal as a changed record
        pa.cut = True  # a cannot reach the store; no reset reaches it
        cut = time.monotonic()
        wait_for(lambda: any(k == "start" and n == "b" for k, n, _ in lines()), 30,
                 "b's command to start")
        b_start = min(t for k, n, t in lines() if k == "start" and n == "b")
        a_last = max(t for k, n, t in lines() if n == "a")
        overlap = a_last - b_start
        assert overlap < 0, (
            f"Date {ahead_s} s ahead: b's command started {overlap:.3f} s before a's last beat "
            f"(a cut at {cut:.3f}): two commands ran at once")
        # b took over within about a lease of the cut (it counts from its
        # first sight of a's last record, not earlier).
        assert b_start - cut < 8 + 1 + 3, b_start - cut
    finally:
        pa.cut = False
        for p in procs:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)
        pa.close()
        pb.close()
