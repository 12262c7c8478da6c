# SPDX-License-Identifier: Apache-2.0
"""The DynamoDB, PostgreSQL and Route 53 stores through the s3lect CLI, on
real servers started by the harness: DynamoDB Local, PostgreSQL (Debian's
server in a temporary data directory) and moto's Route 53.

Timings are scaled down (lease 3 s, harness.cli.FAST). moto's Route 53 does
not enforce the change batch's DELETE-must-match rule (it checks a DELETE
against every value the name ever had; tests/harness/test_harness_servers.py
pins this), so the compare-and-set tests run on DynamoDB and PostgreSQL only,
and on Route 53 check-store must report the store as unsafe.
"""

from __future__ import annotations

import json
import re
import signal
import time

import pytest

from harness.cli import (CHECK_STORE_PASSED, FAST, check_store_verdict, node_env, only_leader,
                         probe, run, status_json, started_lines, wait_for)

LEASE_S = 3.0
FAILOVER_BOUND_S = LEASE_S + 1.0 + 8.0






# ---- election, failover, handover ----

def test_three_processes_elect_exactly_one(backend, cluster, tmp_path, s3lect_bin):
    lock = backend.new_lock("elect")
    nodes = cluster(lock, backend.env, serial=not backend.enforces_cas)
    leader = wait_for(lambda: only_leader(nodes), 30, f"one leader on {backend.kind}")
    wait_for(leader.cmd_wrote_start, 10, "the leader's CMD to start")
    time.sleep(LEASE_S + 1)
    starts = started_lines(tmp_path / "cmd.log")
    assert [s[0] for s in starts] == [leader.id], f"exactly one CMD ran: {starts}"
    assert sum(n.leading() for n in nodes) == 1
    rc, st = status_json(s3lect_bin, lock, backend.env)
    assert rc == 0 and st["live"] and st["leaderID"] == leader.id, st
    assert st["term"] == leader.terms()[-1]


def test_kill9_of_the_leader_fails_over(backend, cluster, tmp_path):
    nodes = cluster(backend.new_lock("kill9"), backend.env, serial=not backend.enforces_cas)
    old = wait_for(lambda: only_leader(nodes), 30, "a leader")
    wait_for(old.cmd_wrote_start, 10, "the leader's CMD to start")
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.kill9()
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), FAILOVER_BOUND_S + 5,
                   "a new leader after kill -9")
    took = time.monotonic() - t0
    assert took <= FAILOVER_BOUND_S, f"failover took {took:.1f} s on {backend.kind}"
    assert took >= LEASE_S * 0.8, f"took over after {took:.1f} s, before the lease could expire"
    assert new.terms()[-1] > term
    wait_for(new.cmd_wrote_start, 10, "the new leader's CMD to start")
    assert started_lines(tmp_path / "cmd.log") == [(old.id, term), (new.id, new.terms()[-1])]


def test_sigterm_hands_over(backend, cluster):
    nodes = cluster(backend.new_lock("term"), backend.env, serial=not backend.enforces_cas)
    old = wait_for(lambda: only_leader(nodes), 30, "a leader")
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.terminate()
    assert old.proc.wait(timeout=20) == 0, old.text()
    assert "releasing leadership" in old.text()
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), 15, "a new leader")
    took = time.monotonic() - t0
    assert took <= 1.0 + 0.5 + 4.0, f"handover took {took:.1f} s on {backend.kind}"
    assert new.terms()[-1] == term + 1


def test_zero_config_peer_mode(cas_backend, cluster):
    """--peer on the new stores: a stable follower long-polls the leader over
    pinned TLS, so a SIGTERM handover is noticed at once, not at the next
    store read (infrequent 30 s here)."""
    timing = FAST[:-4] + ["--infrequent-interval", "30s", "--max-clock-skew", "0", "--peer"]
    nodes = cluster(cas_backend.new_lock("peer"), cas_backend.env, n=2, extra=timing)
    old = wait_for(lambda: only_leader(nodes), 30, "a leader")
    follower = next(n for n in nodes if n is not old)
    time.sleep(1.5)  # the follower settles into its long poll
    t0 = time.monotonic()
    old.terminate()
    assert old.proc.wait(timeout=20) == 0, old.text()
    wait_for(follower.leading, 10, "the follower to take over")
    took = time.monotonic() - t0
    assert took < 2.5, f"peer-mode handover took {took:.2f} s on {cas_backend.kind}: {follower.text()}"


# ---- compare-and-set ----

def test_stale_write_is_refused(cas_impl, s3_probe_bin):
    cas_backend = cas_impl
    lock, env = cas_backend.new_lock("stale"), cas_backend.env
    a = probe(s3_probe_bin, env, "put", lock, "--body", '{"v":1}')
    assert a["outcome"] == "OK" and a["etag"], a
    again = probe(s3_probe_bin, env, "put", lock, "--body", '{"v":1}')
    assert again["outcome"] == "PRECONDITION", f"a second create must be refused: {again}"
    b = probe(s3_probe_bin, env, "put", lock, "--body", '{"v":2}', "--if-match", a["etag"])
    assert b["outcome"] == "OK" and b["etag"] != a["etag"], b
    stale = probe(s3_probe_bin, env, "put", lock, "--body", '{"v":3}', "--if-match", a["etag"])
    assert stale["outcome"] == "PRECONDITION", f"a write with a stale version must fail: {stale}"
    got = probe(s3_probe_bin, env, "get", lock)
    assert got["outcome"] == "OK" and got["etag"] == b["etag"] and json.loads(got["body"]) == {"v": 2}
    missing = probe(s3_probe_bin, env, "put", cas_backend.new_lock("absent"), "--body", "{}",
                    "--if-match", a["etag"])
    assert missing["outcome"] in ("PRECONDITION", "NOT_FOUND"), missing
    assert probe(s3_probe_bin, env, "get", cas_backend.new_lock("absent2"))["outcome"] == "NOT_FOUND"


def test_check_store_on_moto_dynamodb(request, s3lect_bin):
    b = __import__("conftest").moto_dynamodb_backend(request)
    r = run([str(s3lect_bin), "check-store", b.new_lock("check"), "--racers", "6", "--rounds", "3"],
            b.env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED


def test_election_on_moto_dynamodb(request, cluster, tmp_path):
    b = __import__("conftest").moto_dynamodb_backend(request)
    nodes = cluster(b.new_lock("elect"), b.env)
    old = wait_for(lambda: only_leader(nodes), 30, "one leader on moto's DynamoDB")
    old.terminate()
    assert old.proc.wait(timeout=20) == 0
    wait_for(lambda: only_leader([n for n in nodes if n is not old]), 15, "a new leader")


def test_check_store_passes_where_cas_holds(backend, s3lect_bin):
    r = run([str(s3lect_bin), "check-store", backend.new_lock("check"), "--racers", "6",
             "--rounds", "3"], backend.env, timeout=180)
    if backend.enforces_cas:
        assert r.returncode == 0, r.stdout + r.stderr
        assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    else:
        # moto's Route 53 lets a second CREATE and racing batches through:
        # the probe must catch that and call the store unsafe.
        assert r.returncode == 1, r.stdout
        assert "FAIL  a second create-if-absent is refused" in r.stdout, r.stdout
        assert re.fullmatch(r"\d of 7 checks FAILED: this store does not reliably enforce "
                            r"conditional writes; do not use it for s3lect",
                            check_store_verdict(r.stdout)), r.stdout


# ---- the backend misbehaves ----

def test_backend_restart_mid_run(cas_backend, cluster, tmp_path):
    nodes = cluster(cas_backend.new_lock("restart"), cas_backend.env)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    wait_for(leader.cmd_wrote_start, 10, "the leader's CMD to start")
    took = cas_backend.server.restart()
    assert took < 60
    # After the restart exactly one leader again, and never two CMDs at once.
    time.sleep(LEASE_S)
    after = wait_for(lambda: only_leader(nodes), FAILOVER_BOUND_S + 10, "a leader after the restart")
    wait_for(after.cmd_wrote_start, 10, "its CMD to start")
    time.sleep(1.0)
    assert sum(n.leading() for n in nodes) == 1
    # Terms never go down, and a term belongs to one node (a leader that
    # stepped down while the store was away may re-adopt its own term when
    # nobody else took over: docs/algorithm.md).
    starts = started_lines(tmp_path / "cmd.log")
    terms = [t for _, t in starts]
    assert terms == sorted(terms), f"terms never go down: {starts}"
    owners = {}
    for node_id, term in starts:
        assert owners.setdefault(term, node_id) == node_id, f"term {term} held by two nodes: {starts}"


def test_unavailable_backend_stops_the_leader_then_recovers(cas_backend, cluster):
    nodes = cluster(cas_backend.new_lock("pause"), cas_backend.env)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    wait_for(leader.cmd_wrote_start, 10, "the leader's CMD to start")
    cas_backend.server.pause()
    try:
        # The leader cannot renew: it must stop its CMD by its renew deadline
        # (2 s) plus the supervisor's bounds, well before the lease (3 s)
        # could let another node in.
        t0 = time.monotonic()
        wait_for(lambda: not leader.leading(), LEASE_S + 3, "the leader to stop its command")
        assert time.monotonic() - t0 <= LEASE_S + 3
        assert not any(n.leading() for n in nodes)
    finally:
        cas_backend.server.resume()
    wait_for(lambda: only_leader(nodes), FAILOVER_BOUND_S + 15, "a leader after the backend came back")


def test_dynamodb_throttling_is_ridden_out(dynamodb_local, ddb_table, cluster, s3lect_bin):
    from throttle_proxy import ThrottleProxy, ride_out
    proxy = ThrottleProxy(dynamodb_local.port)
    try:
        env = node_env()
        env.update(dynamodb_local.env(), AWS_ENDPOINT_URL_DYNAMODB=proxy.endpoint)
        nodes = cluster(f"dynamodb://{ddb_table}/throttle", env, n=2)
        ride_out(proxy, nodes, LEASE_S, ["ProvisionedThroughputExceededException"])
    finally:
        proxy.close()


def test_route53_throttling_is_ridden_out(moto, r53_zone, cluster):
    from storeutil import ddb_env
    from throttle_proxy import ROUTE53_THROTTLE, ThrottleProxy, ride_out
    proxy = ThrottleProxy(moto.port, ROUTE53_THROTTLE)
    try:
        env = dict(ddb_env(moto), AWS_ENDPOINT_URL_ROUTE_53=proxy.endpoint)
        nodes = cluster(f"route53://{r53_zone}/throttle.stores.example.com", env, n=2, serial=True)
        ride_out(proxy, nodes, LEASE_S, ["Throttling"], past_the_lease=False)
    finally:
        proxy.close()


def test_route53_unavailable_then_back(request, cluster):
    """moto paused longer than the lease: the leader steps down, and leads
    again once moto answers (one node: on moto, nodes must not race)."""
    backend = __import__("conftest").make_backend("route53", request)
    nodes = cluster(backend.new_lock("pause"), backend.env, n=1)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    backend.server.pause()
    try:
        wait_for(lambda: not leader.leading(), LEASE_S + 3, "the leader to stop its command")
    finally:
        backend.server.resume()
    wait_for(leader.leading, FAILOVER_BOUND_S + 15, "leadership back after moto answers again")


# ---- configuration errors: one clear line each ----

@pytest.mark.parametrize("url,want", [
    ("dynamodb://locks", "needs a table and a key"),
    ("dynamodb://x/k", "not a DynamoDB table name"),
    ("dynamodb://locks/k?sort_key=sk", "sort_key and sort_value go together"),
    ("dynamodb://locks/k?pk=a", "unknown parameter 'pk'"),
    ("postgres://127.0.0.1/db", "add ?key=NAME"),
    ("postgres://127.0.0.1/db?key=a&table=drop;table", "must be NAME or SCHEMA.NAME"),
    ("route53://Z1", "needs a hosted zone id and a record name"),
    ("route53://Z1/bad..name", "not a DNS record name"),
    ("mysql://h/db", "names no user"),
    ("mysql://u@h/db", "add ?key=NAME"),
    ("mariadb://u@h/db?key=k&tls=maybe", "tls=maybe is not a mode"),
])
def test_bad_urls_are_one_clear_line(s3lect_bin, clean_env, url, want):
    for cmd in (["status", url], ["run", "--lock", url, "--", "true"], ["init-store", url]):
        r = run([str(s3lect_bin), *cmd], clean_env)
        assert r.returncode == 2, (cmd, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (cmd, r.stderr)


@pytest.mark.parametrize("lock,opts,want", [
    (lock, opts, want)
    for lock in ("dynamodb://locks/k", "route53://Z1/a.example.com")
    for opts, want in ((["--endpoint", "ftp://127.0.0.1:1"], "must start with http:// or https://"),
                       (["--endpoint", "http://user@127.0.0.1:1"], "may not contain user info"),
                       (["--region", "no such region"], "is not a region name"))
    # Route 53 is signed for us-east-1 whatever the region says.
    if not (lock.startswith("route53") and opts[0] == "--region")
])
def test_bad_store_options_are_one_clear_line(s3lect_bin, clean_env, lock, opts, want):
    env = dict(clean_env, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="not-a-secret")
    r = run([str(s3lect_bin), "status", lock, *opts], env)
    assert r.returncode in (1, 2), r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0], r.stderr
    assert "not-a-secret" not in r.stderr


def test_missing_table_says_run_init_store(dynamodb_local, postgres, s3lect_bin):
    from storeutil import ddb_env as _ddb_env, pg_env as _pg_env
    r = run([str(s3lect_bin), "status", "dynamodb://s3lect-no-such-table/k"], _ddb_env(dynamodb_local))
    assert r.returncode == 1 and "does not exist" in r.stderr and "init-store" in r.stderr, r.stderr
    r = run([str(s3lect_bin), "status", f"{postgres.dsn}?key=k&table=no_such_table"], _pg_env(postgres))
    assert r.returncode == 1 and "does not exist" in r.stderr and "init-store" in r.stderr, r.stderr
    r = run([str(s3lect_bin), "status", "postgres://s3lect@127.0.0.1:%d/no_such_db?key=k" % postgres.port],
            _pg_env(postgres))
    assert r.returncode == 1 and 'database "no_such_db" does not exist' in r.stderr, r.stderr


def test_init_store(dynamodb_local, postgres, s3lect_bin):
    from storeutil import ddb_env as _ddb_env, pg_env as _pg_env
    env = _ddb_env(dynamodb_local)
    table = "s3lect-init-" + str(int(time.time() * 1000))
    r = run([str(s3lect_bin), "init-store", f"dynamodb://{table}/k?partition_key=pk&sort_key=sk&sort_value=v"],
            env, timeout=120)
    assert r.returncode == 0 and "created DynamoDB table" in r.stdout, r.stderr
    r = run([str(s3lect_bin), "init-store", f"dynamodb://{table}/k?partition_key=pk&sort_key=sk&sort_value=v"],
            env, timeout=120)
    assert r.returncode == 0 and "already there" in r.stdout, r.stderr
    # The same table named with another key schema: refused, saying what differs.
    r = run([str(s3lect_bin), "init-store", f"dynamodb://{table}/k"], env, timeout=120)
    assert r.returncode == 1 and "partition key 'pk'" in r.stderr and "'LockID'" in r.stderr, r.stderr
    # A lock on the sort-key table works.
    r = run([str(s3lect_bin), "check-store", f"dynamodb://{table}/k?partition_key=pk&sort_key=sk&sort_value=v",
             "--racers", "4", "--rounds", "2"], env, timeout=120)
    assert r.returncode == 0, r.stdout
    # PostgreSQL: twice is fine; electors never create the table themselves.
    pg = _pg_env(postgres)
    url = f"{postgres.dsn}?key=k&table=init_{int(time.time())}"
    r = run([str(s3lect_bin), "status", url], pg)
    assert r.returncode == 1 and "init-store" in r.stderr
    for _ in range(2):
        r = run([str(s3lect_bin), "init-store", url], pg)
        assert r.returncode == 0 and "is ready" in r.stdout, r.stderr
    # Route 53 and S3: nothing to create, said so.
    r = run([str(s3lect_bin), "init-store", "route53://Z1/a.example.com"],
            dict(pg, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="x"))
    assert r.returncode == 1 and "hosted zone" in r.stderr, r.stderr


def test_password_never_shown(postgres, cluster, s3lect_bin, tmp_path):
    """A password in the lock URL stays out of logs, status and metrics
    (the test server trusts every connection, so any password works)."""
    from storeutil import pg_env as _pg_env
    secret = "pw-" + str(time.time_ns())
    url = f"postgres://s3lect:{secret}@127.0.0.1:{postgres.port}/s3lect?key=pw&password={secret}"
    env = _pg_env(postgres)
    r = run([str(s3lect_bin), "init-store", url], env)
    assert r.returncode == 0 and secret not in r.stdout + r.stderr
    from harness.servers import free_port
    port = free_port()
    nodes = cluster(url, env, n=1, extra=FAST + ["--metrics-listen", f"127.0.0.1:{port}"])
    wait_for(lambda: only_leader(nodes), 30, "a leader")
    text = nodes[0].text()
    assert secret not in text and "***" in text, text
    import urllib.request
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert "s3lect_leader" in metrics and secret not in metrics
    for cmd in (["status", url], ["status", url, "--json"], ["check-store", url, "--rounds", "1"]):
        r = run([str(s3lect_bin), *cmd], env, timeout=120)
        assert r.returncode in (0, 3) and secret not in r.stdout + r.stderr, (cmd, r.stdout, r.stderr)
    nodes[0].proc.send_signal(signal.SIGTERM)
    nodes[0].proc.wait(timeout=20)
    assert secret not in nodes[0].text()


def test_postgres_connection_loss_is_retried(postgres, pg_ready, cluster):
    """The server kills every backend connection (pg_terminate_backend): the
    leader's next statement fails, the connection is made again, leadership
    is kept."""
    from storeutil import pg_env as _pg_env
    nodes = cluster(f"{pg_ready}?key=term-conn", _pg_env(postgres), n=1)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    term = leader.terms()[-1]
    for _ in range(3):
        postgres.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE datname = 's3lect' AND pid <> pg_backend_pid()")
        time.sleep(1.2)
    time.sleep(LEASE_S)
    assert leader.leading() and leader.terms()[-1] == term, leader.text()


# ---- Route 53's change-batch rules, on a strict fake (tests/stores/fake_route53.py) ----

@pytest.fixture
def strict_r53():
    from fake_route53 import FakeRoute53
    fake = FakeRoute53()
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3LECT_", "PG")) or k == "S3LECT_NEW_LOCK_WAIT"}
    env.update(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="not-a-secret",
               AWS_REGION="us-east-1", AWS_ENDPOINT_URL_ROUTE_53=fake.endpoint)
    yield fake, env
    fake.close()


def test_route53_batch_rules_check_store_passes(strict_r53, s3lect_bin):
    """Where the batch's rules hold, the store's requests make it a
    compare-and-set: a second CREATE, a stale DELETE and all but one of N
    racing writers are refused."""
    fake, env = strict_r53
    r = run([str(s3lect_bin), "check-store", f"route53://{fake.zone}/lock.{fake.domain}",
             "--racers", "8", "--rounds", "5"], env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    assert fake.refused >= 5 * 7 + 2, f"the fake refused only {fake.refused} batches"


def test_route53_batch_rules_racing_nodes_elect_one(strict_r53, cluster, tmp_path):
    """Three nodes started at once and two followers racing for a dead
    leader's lock: exactly one wins each time."""
    fake, env = strict_r53
    nodes = cluster(f"route53://{fake.zone}/leader.{fake.domain}", env)
    old = wait_for(lambda: only_leader(nodes), 30, "one leader among 3 racing nodes")
    wait_for(old.cmd_wrote_start, 10, "its CMD to start")
    time.sleep(LEASE_S + 1)
    assert sum(n.leading() for n in nodes) == 1
    term = old.terms()[-1]
    old.kill9()
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), FAILOVER_BOUND_S + 5,
                   "one new leader after kill -9")
    wait_for(new.cmd_wrote_start, 10, "its CMD to start")
    time.sleep(1.0)
    assert sum(n.leading() for n in nodes if n is not old) == 1
    assert new.terms()[-1] > term
    starts = started_lines(tmp_path / "cmd.log")
    assert starts == [(old.id, term), (new.id, new.terms()[-1])], starts


# ---- PostgreSQL over TLS, as libpq does it ----

@pytest.fixture(scope="module")
def pg_tls(tmp_path_factory):
    """A PostgreSQL server with ssl=on and a certificate for 127.0.0.1 from a
    CA made here; a second CA that signed nothing."""
    from harness.pgserver import PostgresServer
    from harness.pki import issue, make_ca
    d = tmp_path_factory.mktemp("pgtls")
    for ca in ("ca", "other-ca"):
        make_ca(d, ca, subject=f"/CN={ca}", constraints=False)
    issue(d, "server", "ca", san="IP:127.0.0.1", subject="/CN=127.0.0.1", eku=None)
    srv = PostgresServer(settings={"ssl": "on", "log_connections": "on"})
    for f in ("server.pem", "server.key"):
        (srv.workdir / f).write_bytes((d / f).read_bytes())
        srv.give_to_server_user(srv.workdir / f, 0o600)
    srv.settings.update(ssl_cert_file=str(srv.workdir / "server.pem"),
                        ssl_key_file=str(srv.workdir / "server.key"))
    srv.start()
    yield srv, d
    srv.stop()


def test_postgres_tls_per_libpq(pg_tls, s3lect_bin):
    srv, d = pg_tls
    from storeutil import pg_env
    env = pg_env(srv)
    base = f"postgres://s3lect@127.0.0.1:{srv.port}/s3lect?key=tls&sslmode=verify-full"
    good = f"{base}&sslrootcert={d / 'ca.pem'}"
    r = run([str(s3lect_bin), "init-store", good], env)
    assert r.returncode == 0, r.stderr
    r = run([str(s3lect_bin), "check-store", good, "--racers", "4", "--rounds", "2"], env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    # The connections really were TLS: the server logs each one's protocol.
    import re
    authorized = re.findall(r"connection authorized: user=s3lect database=s3lect.*", srv.log_text())
    assert authorized and all("SSL enabled" in a for a in authorized), authorized[-3:]
    # A certificate from another CA: refused as a configuration error, one line.
    r = run([str(s3lect_bin), "status", f"{base}&sslrootcert={d / 'other-ca.pem'}"], env)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "certificate" in lines[0] and "fix the lock URL" in lines[0], r.stderr
    # libpq's own parameters decide: sslmode=disable talks plain TCP.
    r = run([str(s3lect_bin), "status", base.replace("verify-full", "disable")], env)
    assert r.returncode in (0, 3), r.stderr
    last = re.findall(r"connection authorized: user=s3lect database=s3lect.*", srv.log_text())[-1]
    assert "SSL enabled" not in last, last


def test_postgres_row_not_written_by_s3lect_is_named(postgres, pg_ready, s3lect_bin):
    """A row without a version (made by hand) could never be written over:
    reported as a configuration error that says what to do, not retried
    for ever as a lost race."""
    from storeutil import pg_env
    key = f"hand-{time.time_ns()}"
    postgres.psql("ALTER TABLE s3lect_locks ALTER COLUMN version DROP NOT NULL")
    try:
        postgres.psql(f"INSERT INTO s3lect_locks (name, record, version) VALUES ('{key}', '{{}}', NULL)")
        r = run([str(s3lect_bin), "status", f"{pg_ready}?key={key}"], pg_env(postgres))
        assert r.returncode == 1 and "not written by s3lect" in r.stderr, r.stderr
        assert "delete the row" in r.stderr
    finally:
        postgres.psql(f"DELETE FROM s3lect_locks WHERE name = '{key}'")
        postgres.psql("ALTER TABLE s3lect_locks ALTER COLUMN version SET NOT NULL")


def test_postgres_peer_mode_advertises_the_route_to_the_server(s3lect_bin, cluster):
    """Zero-config peer mode advertises this host's address on the route to
    the store: for a PostgreSQL server reached at ::1 that is [::1], not the
    127.0.0.1 a store without a server address falls back to."""
    from harness.pgserver import PostgresServer
    from storeutil import pg_env
    srv = PostgresServer(settings={"listen_addresses": "127.0.0.1,::1"}).start()
    try:
        url = f"postgres://s3lect@[::1]:{srv.port}/s3lect?key=route"
        env = pg_env(srv)
        r = run([str(s3lect_bin), "init-store", url], env)
        assert r.returncode == 0, r.stderr
        nodes = cluster(url, env, n=1, extra=FAST + ["--peer"])
        wait_for(lambda: only_leader(nodes), 30, "a leader")
        rc, st = status_json(s3lect_bin, url, env)
        assert rc == 0 and st["leaderAddr"].startswith("[::1]:"), st
    finally:
        srv.stop()


def test_postgres_takeover_counts_from_the_write(postgres, pg_ready, cluster):
    """The follower judges the dead leader's record by PostgreSQL's clock
    (now() against the server-stamped updated_at, in ms; docs/algorithm.md,
    "The store's clock"): started 5 s after the kill, it takes over about L
    after the leader's last write, not L after its own first read (which
    would be at least 5 s + L after the kill)."""
    from storeutil import pg_env
    lease, renew, wait = 8.0, 1.0, 5.0
    timing = ["--lease-timeout", "8s", "--renew-interval", "1s", "--renew-deadline", "3s",
              "--frequent-interval", "500ms", "--infrequent-interval", "1s",
              "--max-clock-skew", "0"]
    env = pg_env(postgres)
    lock = f"{pg_ready}?key=clock-{time.monotonic_ns()}"
    [a] = cluster(lock, env, n=1, extra=timing)
    wait_for(a.leading, 30, "a to lead")
    time.sleep(2 * renew)  # a few renewals
    a.kill9()
    killed = time.monotonic()  # a's last write was sent at most `renew` before this
    time.sleep(wait)
    b = cluster(lock, env, n=1, extra=timing)[-1]
    wait_for(lambda: "acquired leadership" in b.text(), wait + lease + 15, "b to take over")
    took = time.monotonic() - killed
    assert took >= lease - renew - 0.5, (took, b.text())
    assert took <= lease + 2.0, (f"took over {took:.2f} s after the kill: counted from the first "
                                 f"read ({wait + lease:g} s), not from the write", b.text())
