# SPDX-License-Identifier: Apache-2.0
"""The s3lect CLI on s3:// locks against a real MinIO: real processes, real signals.

Timings are scaled down (lease 3 s, see harness.cli.FAST); bounds are
generous for a loaded 2-core machine.
"""

from __future__ import annotations

import json
import secrets
import signal
import time

import pytest

from harness.cli import FAST, Node, only_leader, run, status_json, started_lines, wait_for

LEASE_S = 3.0
FREQUENT_S = 0.5
INFREQUENT_S = 1.0
# Failover after a crash: about L + frequent (DESIGN §4); slack for a loaded machine.
FAILOVER_BOUND_S = LEASE_S + max(FREQUENT_S, INFREQUENT_S) + 8.0


@pytest.fixture
def s3env(minio, clean_env):
    env = dict(clean_env)
    env.update(minio.env())
    return env


@pytest.fixture
def lock(minio, request):
    name = request.node.name.replace("[", "-").replace("]", "")
    return f"s3://{minio.bucket}/cli/{name}-{secrets.token_hex(4)}.json"


@pytest.fixture
def cluster(s3lect_bin, tmp_path, s3env):
    nodes: list[Node] = []

    def start(lock: str, n: int = 3, env=None, extra=None) -> list[Node]:
        for _ in range(n):
            nodes.append(Node(s3lect_bin, tmp_path, lock, f"n{len(nodes)}", env or s3env, extra))
        return nodes

    yield start
    for node in nodes:
        node.stop()


def object_of(minio, lock: str):
    k = lock.split("/", 3)[3]
    return minio.client().get(minio.bucket, k)






def test_three_processes_elect_exactly_one(cluster, lock, tmp_path, s3lect_bin, s3env, minio):
    nodes = cluster(lock)
    leader = wait_for(lambda: only_leader(nodes), 20, "one leader among 3 s3lect run processes")
    # Over more than a lease, nobody else starts the command.
    time.sleep(LEASE_S + 1)
    starts = started_lines(tmp_path / "cmd.log")
    assert [s[0] for s in starts] == [leader.id], f"exactly one CMD ran: {starts}"
    assert sum(n.leading() for n in nodes) == 1

    rc, st = status_json(s3lect_bin, lock, s3env)
    assert rc == 0 and st["live"] and st["leaderID"] == leader.id
    assert st["term"] == starts[0][1] == leader.terms()[-1]


def test_kill9_of_the_leader_fails_over_with_a_higher_term(cluster, lock, tmp_path):
    nodes = cluster(lock)
    old = wait_for(lambda: only_leader(nodes), 20, "a leader")
    # Kill only once its CMD has written its start line (a kill between the
    # fork and the shell's echo would leave no trace of the first term).
    wait_for(old.cmd_wrote_start, 10, "the leader's CMD to write its start line")
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.kill9()
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), FAILOVER_BOUND_S + 5,
                   "a new leader after kill -9")
    took = time.monotonic() - t0
    assert took <= FAILOVER_BOUND_S, f"failover took {took:.1f} s (bound {FAILOVER_BOUND_S} s)"
    assert new.terms()[-1] > term
    wait_for(new.cmd_wrote_start, 10, "the new leader's CMD to write its start line")
    starts = started_lines(tmp_path / "cmd.log")
    assert starts == [(old.id, term), (new.id, new.terms()[-1])], starts


def test_sigterm_hands_over_quickly(cluster, lock, tmp_path, s3lect_bin, s3env):
    nodes = cluster(lock)
    old = wait_for(lambda: only_leader(nodes), 20, "a leader")
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.terminate()
    assert old.proc.wait(timeout=20) == 0, old.text()
    assert "releasing leadership" in old.text()
    # The released record is free at once: a follower takes over at its next poll.
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), 15, "a new leader after SIGTERM")
    took = time.monotonic() - t0
    assert took <= INFREQUENT_S + FREQUENT_S + 4.0, f"handover took {took:.1f} s"
    assert new.terms()[-1] == term + 1


def test_status_json_matches_the_object_in_the_bucket(cluster, lock, minio, s3lect_bin, s3env):
    nodes = cluster(lock, n=1)
    wait_for(lambda: only_leader(nodes), 20, "a leader")
    rc, st = status_json(s3lect_bin, lock, s3env)
    obj = object_of(minio, lock)
    assert obj.status == 200
    rec = json.loads(obj.body)
    # status read the same version of the object, or the leader renewed in between.
    if st["etag"] != obj.etag:
        rc, st = status_json(s3lect_bin, lock, s3env)
        obj = object_of(minio, lock)
        rec = json.loads(obj.body)
    assert st["etag"] == obj.etag, "status shows the object's ETag exactly"
    for field in ("leaderID", "leaderAddr", "term", "leaseMs", "incarnation"):
        assert st[field] == rec[field], field
    assert rec["leaderID"] == "n0" and rec["leaseMs"] == 3000
    assert st["lastUpdated"][:19] == rec["lastUpdated"][:19]
    assert rc == 0 and st["live"] is True


def test_corrupt_object_is_reported_then_recovered_after_expiry(cluster, lock, minio, s3lect_bin, s3env):
    k = lock.split("/", 3)[3]
    put = minio.client().put(minio.bucket, k, b"this is {not a record")
    assert put.status == 200
    rc, st = status_json(s3lect_bin, lock, s3env)
    assert rc == 3 and st["exists"] and st["corrupt"] is True, st

    t0 = time.monotonic()
    nodes = cluster(lock, n=1)
    node = nodes[0]
    wait_for(lambda: "corrupt" in node.text(), 15, "the corrupt record to be reported")
    assert not node.leading()
    # Treated as a record whose holder is unknown: taken over once it expires.
    wait_for(node.leading, FAILOVER_BOUND_S + 5, "takeover of the corrupt record after expiry")
    assert time.monotonic() - t0 >= LEASE_S * 0.9, "not taken over before the lease could expire"
    rec = json.loads(object_of(minio, lock).body)
    assert rec["leaderID"] == "n0" and rec["term"] >= 1
    rc, st = status_json(s3lect_bin, lock, s3env)
    assert rc == 0 and st["corrupt"] is False and st["leaderID"] == "n0"


def test_wrong_secret_is_reported_clearly(cluster, lock, minio, s3lect_bin, s3env):
    wrong = "wrong-" + secrets.token_hex(10)
    env = dict(s3env, AWS_SECRET_ACCESS_KEY=wrong)
    r = run([str(s3lect_bin), "status", lock], env)
    assert r.returncode == 1, r
    assert "SignatureDoesNotMatch" in r.stderr and "secret" in r.stderr and "s3:GetObject" in r.stderr
    assert wrong not in r.stderr + r.stdout and minio.secret_key not in r.stderr + r.stdout

    node = cluster(lock, n=1, env=env)[0]
    wait_for(lambda: "SignatureDoesNotMatch" in node.text(), 15, "the AUTH error from s3lect run")
    assert not node.leading() and node.alive()
    assert wrong not in node.text() and "Signature=" not in node.text()


def test_missing_bucket_is_fatal_and_names_the_bucket(cluster, s3lect_bin, s3env):
    bucket = f"s3lect-no-such-{secrets.token_hex(4)}"
    lock = f"s3://{bucket}/leader.json"
    r = run([str(s3lect_bin), "status", lock], s3env)
    assert r.returncode == 1
    assert f"bucket '{bucket}' does not exist" in r.stderr, r.stderr
    node = cluster(lock, n=1)[0]
    wait_for(lambda: f"bucket '{bucket}' does not exist" in node.text(), 15, "the FATAL error from s3lect run")
    assert not node.leading()


def test_s3_flags_select_endpoint_and_region(lock, minio, s3lect_bin, clean_env):
    """--endpoint/--region/--path-style on the command line; credentials only from the env."""
    env = dict(clean_env, AWS_ACCESS_KEY_ID=minio.access_key, AWS_SECRET_ACCESS_KEY=minio.secret_key)
    r = run([str(s3lect_bin), "status", lock, "--endpoint", minio.endpoint, "--region", "us-east-1",
             "--path-style"], env)
    assert r.returncode == 3 and "no lock record" in r.stdout, (r.returncode, r.stdout, r.stderr)
    r = run([str(s3lect_bin), "status", "--endpoint", "ftp://x", lock], env)
    assert r.returncode != 0 and "http://" in r.stderr
