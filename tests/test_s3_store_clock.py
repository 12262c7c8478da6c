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
