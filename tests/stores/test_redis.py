# SPDX-License-Identifier: Apache-2.0
"""The redis:// store beyond the shared store tests (test_stores_cli.py runs
election, kill -9, SIGTERM handover, peer mode, compare-and-set, check-store,
restart and outage on it): the server killed with and without its
append-only file, a paused server, a slow network (a delaying TCP proxy),
TLS, the ACL user's least privilege, a replica, Redis Cluster, bad URLs and
credentials (one clear line each), and no password in any output.

Every server is Debian's redis-server started by tests/harness/redis_server.py
on a free 127.0.0.1 port, with the store's ACL user (password in
S3LECT_REDIS_PASSWORD, never in the URL unless a test puts it there).
"""

from __future__ import annotations

import json
import secrets
import signal
import time

import pytest

from harness.cli import (CHECK_STORE_PASSED, FAST, check_store_verdict, only_leader, run,
                         started_lines, wait_for)
from harness.redis_server import KEY_PREFIX, STORE_ACL, RedisServer
from storeutil import redis_env

# Suite stores runs this file in its second pytest session (scripts/test).
pytestmark = pytest.mark.second_session

LEASE_S = 3.0
FAILOVER_BOUND_S = LEASE_S + 1.0 + 8.0


@pytest.fixture
def server_factory():
    servers: list[RedisServer] = []

    def make(**kw) -> RedisServer:
        srv = RedisServer(**kw)
        servers.append(srv)
        return srv.start()

    yield make
    for srv in reversed(servers):
        srv.stop()


def _lock(srv: RedisServer, name: str) -> str:
    return f"{srv.lock_prefix}{name}-{secrets.token_hex(4)}"


def _key(lock: str) -> str:
    return lock.split("/", 3)[3].split("?")[0]


def _at_most_one_leader_for(nodes, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert sum(n.leading() for n in nodes) <= 1, [n.text()[-2000:] for n in nodes]
        time.sleep(0.05)


def _one_line(r, want: str, code: int = 1) -> str:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0], r.stderr
    return lines[0]


# ---- the server dies ----

def test_kill9_of_redis_with_aof_keeps_the_lock_and_the_leader(server_factory, cluster):
    """appendfsync always: the record survives a kill -9 of Redis; the leader
    renews against the same version and keeps its term, nobody takes over."""
    srv = server_factory(aof=True)
    lock = _lock(srv, "aof")
    nodes = cluster(lock, redis_env(srv))
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader on redis")
    wait_for(leader.cmd_wrote_start, 10, "its CMD to start")
    before = srv.call("HGET", _key(lock), "v")
    srv.restart(hard=True)
    assert srv.call("HGET", _key(lock), "v") is not None
    _at_most_one_leader_for(nodes, LEASE_S + 2)
    assert only_leader(nodes) is leader, [n.text()[-1500:] for n in nodes]
    assert len([t for n in nodes for t in n.terms()]) == 1, "no new term after a restart with AOF"
    assert srv.call("HGET", _key(lock), "v") != before, "the leader renewed after the restart"


def test_restart_without_persistence_loses_the_lock_then_one_leader(server_factory, cluster,
                                                                    tmp_path):
    """Without persistence a restart empties Redis: the lock is gone. The
    leader's next renewal is refused (its version no longer exists) and it
    stops its CMD; the followers, which saw the lock exist, treat the missing
    key as free only after max_lease_timeout (the engine's hold for a
    vanished lock, docs/algorithm.md), so at no moment do two nodes lead."""
    srv = server_factory(aof=False)
    lock = _lock(srv, "noaof")
    nodes = cluster(lock, redis_env(srv))
    old = wait_for(lambda: only_leader(nodes), 30, "a leader on redis")
    wait_for(old.cmd_wrote_start, 10, "its CMD to start")
    # Every follower has read the lock: the loss happens under a running
    # cluster. (A node that never saw the lock cannot know it was lost and
    # takes a missing one at once, as on a fresh cluster: docs/algorithm.md,
    # "A lock that vanishes". Seen once when the restart came before a
    # follower's first read.)
    wait_for(lambda: all(n is old or f"leader is {old.id}" in n.text() for n in nodes), 15,
             "every follower to see the leader")
    t0 = time.monotonic()
    srv.restart(hard=True)
    after = None
    while time.monotonic() < t0 + FAILOVER_BOUND_S + 4 * LEASE_S + 10:
        assert sum(n.leading() for n in nodes) <= 1, [n.text()[-2000:] for n in nodes]
        after = only_leader(nodes)
        if after and srv.call("EXISTS", _key(lock)) == 1 and \
                len([t for n in nodes for t in n.terms()]) >= 2:
            break
        time.sleep(0.05)
    assert after, [n.text()[-2000:] for n in nodes]
    _at_most_one_leader_for(nodes, LEASE_S)
    assert only_leader(nodes) is after
    assert any("vanished from the store" in n.text() for n in nodes), [n.text()[-2000:] for n in nodes]
    starts = started_lines(nodes[0].marker)
    assert len(starts) >= 2 and starts[-1][0] == after.id, starts


def test_paused_redis_stops_the_leader_then_recovers(server_factory, cluster):
    srv = server_factory()
    nodes = cluster(_lock(srv, "pause"), redis_env(srv))
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    srv.pause()
    try:
        # The leader cannot renew: it steps down within its renew deadline,
        # and nobody else can take the lock meanwhile.
        wait_for(lambda: not any(n.leading() for n in nodes), LEASE_S + 3, "the leader to step down")
        _at_most_one_leader_for(nodes, 2)
        assert not any(n.leading() for n in nodes)
    finally:
        srv.resume()
    wait_for(lambda: only_leader(nodes), FAILOVER_BOUND_S + 10, "a leader once Redis answers")
    assert "Redis" in leader.text() and srv.password not in leader.text()


def test_slow_network_through_a_delaying_proxy(server_factory, cluster):
    """200 ms each way (every command and answer delayed) still elects one
    leader and keeps it; 3 s each way (beyond the renew deadline) makes the
    leader step down rather than run on without the lock."""
    from chaos.chaos_lib import Proxy
    srv = server_factory()
    proxy = Proxy("redis", srv.port, seed=1, answer=None)
    try:
        lock = f"redis://{srv.user}@127.0.0.1:{proxy.port}/{KEY_PREFIX}delay-{secrets.token_hex(4)}"
        proxy.set(latency=0.2)
        nodes = cluster(lock, redis_env(srv), n=2)
        leader = wait_for(lambda: only_leader(nodes), 30, "a leader through the slow proxy")
        _at_most_one_leader_for(nodes, LEASE_S + 1)
        assert only_leader(nodes) is leader
        proxy.set(latency=3.0)
        wait_for(lambda: not leader.leading(), LEASE_S + 8, "the leader to step down")
        assert "timed out" in leader.text(), leader.text()[-3000:]
        proxy.heal()
        wait_for(lambda: only_leader(nodes), FAILOVER_BOUND_S + 10, "a leader once the net is fast")
    finally:
        proxy.close()


# ---- TLS ----

def test_tls_elects_and_checks_the_certificate(server_factory, cluster, s3lect_bin):
    srv = server_factory(tls=True)
    env = redis_env(srv)
    lock = _lock(srv, "tls")
    assert lock.startswith("rediss://")
    r = run([str(s3lect_bin), "check-store", lock, "--ca-file", env["S3LECT_TEST_REDIS_CA_FILE"],
             "--rounds", "2"], env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    nodes = cluster(lock, env, n=2, extra=FAST + ["--ca-file", env["S3LECT_TEST_REDIS_CA_FILE"]])
    wait_for(lambda: only_leader(nodes), 30, "a leader over TLS")
    # Redis killed under open TLS connections: writes to them fail (no
    # SIGPIPE kills a node), and a leader is back once it answers.
    for _ in range(2):
        srv.restart(hard=True)
        time.sleep(0.5)
    wait_for(lambda: only_leader(nodes), FAILOVER_BOUND_S, "a leader after kill -9 of TLS Redis")
    assert all(n.alive() for n in nodes), [n.text()[-2000:] for n in nodes]
    # Without the CA: the server's certificate is not trusted, one line.
    r = run([str(s3lect_bin), "status", lock], env)
    _one_line(r, "certificate is not trusted")
    # Plain redis:// to a TLS port: no answer it understands; a clear retry line.
    plain = lock.replace("rediss://", "redis://", 1)
    r = run([str(s3lect_bin), "status", plain], env, timeout=60)
    assert r.returncode == 1 and "Redis 127.0.0.1" in r.stderr, r.stderr


def test_tls_checks_the_host_name(server_factory, s3lect_bin):
    """A certificate for localhost only: rediss://localhost works, the same
    server as rediss://127.0.0.1 is refused (the name does not match)."""
    srv = server_factory(tls=True, tls_san="DNS:localhost")
    env = redis_env(srv)
    ca = ["--ca-file", env["S3LECT_TEST_REDIS_CA_FILE"]]
    good = f"rediss://{srv.user}@localhost:{srv.port}/{KEY_PREFIX}name"
    r = run([str(s3lect_bin), "status", good, *ca], env)
    assert r.returncode == 3, r.stdout + r.stderr
    bad = f"rediss://{srv.user}@127.0.0.1:{srv.port}/{KEY_PREFIX}name"
    _one_line(run([str(s3lect_bin), "status", bad, *ca], env), "not trusted")


# ---- least privilege, replicas, Cluster ----

def test_acl_with_exactly_the_store_commands(server_factory, s3lect_bin):
    """The harness's ACL user has only STORE_ACL on s3lect/*: check-store
    passes; without one of the commands a script calls, one line names the
    commands the ACL needs; a key outside the pattern is refused too."""
    srv = server_factory()
    env = redis_env(srv)
    r = run([str(s3lect_bin), "check-store", _lock(srv, "acl"), "--rounds", "2"], env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    # It says what it verified on Redis, and what it cannot.
    assert "a primary, not a replica" in r.stdout and "not in Cluster mode" in r.stdout, r.stdout
    assert "replication is asynchronous" in r.stdout, r.stdout
    srv.call("ACL", "SETUSER", srv.user, "-hset")
    r = run([str(s3lect_bin), "check-store", _lock(srv, "acl2"), "--rounds", "1"], env, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("FAIL")]
    assert len(fails) == 1 and "permission error" in fails[0], r.stdout
    line = fails[0]
    assert "the ACL user needs" in line, line
    for cmd in STORE_ACL.split()[:-1]:
        assert cmd in line, line
    srv.call("ACL", "SETUSER", srv.user, "+hset")
    outside = f"redis://{srv.user}@127.0.0.1:{srv.port}/elsewhere/k"
    line = _one_line(run([str(s3lect_bin), "status", outside], env), "NOPERM")
    assert "~KEY" in line
    # INFO is optional: without it the store still works.
    srv.call("ACL", "SETUSER", srv.user, "-info")
    r = run([str(s3lect_bin), "check-store", _lock(srv, "noinfo"), "--rounds", "1"], env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_replica_is_refused_for_writes(server_factory, s3lect_bin):
    primary = server_factory()
    replica = server_factory(replica_of=primary)
    env = redis_env(replica)
    lock = f"redis://{replica.user}@127.0.0.1:{replica.port}/{KEY_PREFIX}rep"
    r = run([str(s3lect_bin), "check-store", lock, "--rounds", "1"], env, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [ln for ln in r.stdout.splitlines() if ln.strip().startswith("FAIL")]
    assert len(fails) == 1 and "is a replica" in fails[0], r.stdout
    assert "point the lock URL at the primary" in fails[0]
    # Reads work on a replica: status answers (no lock yet).
    r = run([str(s3lect_bin), "status", lock], env)
    assert r.returncode == 3, r.stdout + r.stderr


def test_cluster_mode_is_refused(server_factory, s3lect_bin):
    class ClusterRedis(RedisServer):
        def config_text(self) -> str:
            return super().config_text() + "cluster-enabled yes\n" \
                f"cluster-config-file {self.workdir}/nodes.conf\n"
    srv = ClusterRedis()
    srv.start()
    try:
        r = run([str(s3lect_bin), "status", _lock(srv, "cl")], redis_env(srv))
        line = _one_line(r, "Cluster")
        assert "single primary" in line
    finally:
        srv.stop()


# ---- configuration errors, credentials, secrets ----

@pytest.mark.parametrize("url,want", [
    ("redis://127.0.0.1:6379", "names no key"),
    ("redis://127.0.0.1:6379/", "names no key"),
    ("redis:///k", "names no server"),
    ("redis://127.0.0.1:0/k", "port must be a number from 1 to 65535"),
    ("redis://127.0.0.1:99999/k", "port must be a number"),
    ("redis://h/k?db=x", "db must be a database number"),
    ("redis://h/k?tls=1", "unknown parameter"),
    ("redis://h/k#frag", "fragment"),
    ("redis://u%zz@h/k", "malformed %-escape"),
    ("redis://u:p%zz@h/k", "is not valid"),
    ("redis:h/k", "write redis://HOST:PORT/KEY"),
])
def test_bad_urls_are_one_clear_line(s3lect_bin, clean_env, url, want):
    for cmd in (["status", url], ["run", "--lock", url, "--", "true"]):
        r = run([str(s3lect_bin), *cmd], clean_env)
        assert r.returncode == 2, (cmd, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (cmd, r.stderr)
        assert "p%zz" not in r.stderr


def test_bad_credentials_are_one_line_naming_the_user(server_factory, s3lect_bin, clean_env,
                                                     tmp_path):
    srv = server_factory()
    wrong = "wrong-" + secrets.token_hex(6)
    url = f"redis://{srv.user}:{wrong}@127.0.0.1:{srv.port}/{KEY_PREFIX}cred"
    r = run([str(s3lect_bin), "status", url], clean_env, timeout=60)
    line = _one_line(r, "refused the login")
    assert f"user {srv.user}" in line and wrong not in r.stdout + r.stderr, line
    # An elector says the same once and keeps trying (the password may be fixed
    # on the server); it never leads.
    from harness.cli import Node
    node = Node(s3lect_bin, tmp_path, url, "bad", clean_env)
    try:
        wait_for(lambda: "refused the login" in node.text(), 20, "the login error")
        assert not node.leading() and wrong not in node.text(), node.text()
    finally:
        node.stop()
    # No password at all for a server that needs one.
    url = f"redis://127.0.0.1:{srv.port}/{KEY_PREFIX}cred"
    line = _one_line(run([str(s3lect_bin), "status", url], clean_env), "NOAUTH")
    assert "S3LECT_REDIS_PASSWORD" in line
    # Nothing listening: a retry line, not a crash.
    from harness.servers import free_port
    r = run([str(s3lect_bin), "status", f"redis://127.0.0.1:{free_port()}/k"], clean_env)
    _one_line(r, "Connection refused")


def test_password_never_shown(server_factory, cluster, s3lect_bin, clean_env):
    """A password in the URL (or in S3LECT_REDIS_PASSWORD) stays out of logs,
    status, check-store and metrics."""
    srv = server_factory()
    url = f"redis://{srv.user}:{srv.password}@127.0.0.1:{srv.port}/{KEY_PREFIX}pw"
    env = dict(clean_env)
    from harness.servers import free_port
    port = free_port()
    nodes = cluster(url, env, n=1, extra=FAST + ["--metrics-listen", f"127.0.0.1:{port}"])
    wait_for(lambda: only_leader(nodes), 30, "a leader")
    text = nodes[0].text()
    assert srv.password not in text and "***" in text, text
    import urllib.request
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "s3lect_leader" in metrics and srv.password not in metrics
    for cmd in (["status", url], ["status", url, "--json"], ["check-store", url, "--rounds", "1"],
                ["run", "--lock", url.replace(srv.password, "x"), "--", "true"]):
        r = run([str(s3lect_bin), *cmd], env, timeout=120)
        assert srv.password not in r.stdout + r.stderr, (cmd, r.stdout, r.stderr)
    rc = run([str(s3lect_bin), "status", url, "--json"], env)
    assert json.loads(rc.stdout)["term"] == nodes[0].terms()[0]
    nodes[0].proc.send_signal(signal.SIGTERM)
    nodes[0].proc.wait(timeout=20)
    assert srv.password not in nodes[0].text()


def test_key_not_written_by_s3lect_is_named(server_factory, s3lect_bin):
    srv = server_factory()
    env = redis_env(srv)
    srv.call("SET", KEY_PREFIX + "str", "x")
    srv.call("HSET", KEY_PREFIX + "hash", "other", "x")
    base = f"redis://{srv.user}@127.0.0.1:{srv.port}/{KEY_PREFIX}"
    _one_line(run([str(s3lect_bin), "status", base + "str"], env), "holds another type")
    _one_line(run([str(s3lect_bin), "status", base + "hash"], env), "not written by s3lect")


def test_oversized_value_is_a_corrupt_record_taken_over_after_a_lease(server_factory, cluster):
    """Issue 38 item 10: a hand-written record over 64 KiB is a corrupt
    record, as on every object store (GCS, Azure, S3): the nodes say so,
    with what happens next and what to do, and one leads after a lease.
    Before, it was FATAL ("not an s3lect lock") and no node led."""
    srv = server_factory()
    lock = _lock(srv, "oversized")
    srv.call("HSET", _key(lock), "r", "x" * (70 * 1024), "v", "hand-written", "t", "0")
    nodes = cluster(lock, redis_env(srv), n=2)
    leader = wait_for(lambda: only_leader(nodes), LEASE_S + 20, "a leader over the oversized value")
    text = "".join(n.text() for n in nodes)
    assert "larger than 64 KiB" in text and "taken over once it has stood unchanged" in text, text
    assert "not an s3lect lock" not in text.replace("not an s3lect record", ""), text
    assert leader.terms()[-1] >= 1
