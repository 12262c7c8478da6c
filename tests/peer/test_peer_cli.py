# SPDX-License-Identifier: Apache-2.0
"""Peer mode end to end: `s3lect run --peer` nodes on MinIO, each behind its own
counting proxy so S3 requests are measured per node; real TLS with a throwaway CA.

Checks: followers make no S3 requests while leadership is stable (they long-poll
the leader over HTTPS), the leader makes no GETs, a release is noticed at once,
a crash falls back to S3 and fails over, and a follower that cannot verify the
leader falls back to S3 and still follows correctly.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from harness import cli
from harness.cli import only_leader
from harness.countproxy import CountingProxy
from harness.pki import issue as issue_cert, make_ca, spki_pin
from harness.servers import free_port
from harness.wait import wait_for

# And --kill-timeout 500ms, Node's default.
TIMING = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
          "--frequent-interval", "500ms", "--infrequent-interval", "2s"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict:
    """A throwaway CA, an unrelated CA, and `issue(name)`: a server certificate
    for 127.0.0.1 from the first CA that names `name` (CN), as every node's
    certificate must name its own --id (docs/peer.md "Whose answer counts")."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        make_ca(d, ca)

    def issue(name: str) -> tuple[Path, Path]:
        if not (d / f"{name}.pem").exists():
            issue_cert(d, name, "ca", san="IP:127.0.0.1,DNS:localhost")
        return d / f"{name}.pem", d / f"{name}.key"
    return {"ca": d / "ca.pem", "other-ca": d / "other-ca.pem", "issue": issue}


class PeerNode(cli.Node):
    """One `s3lect run --peer` node (a harness Node: its own process group and
    log TMP/ID.log, the command `sleep 600`), reaching MinIO through its own
    counting proxy. With zero_config it gets no certificate flags and no
    --addr: it makes its own key, and advertises the address that routes to
    the S3 endpoint (127.0.0.1 here) with an ephemeral port."""

    def __init__(self, bin_, tmp, minio, lock, node_id, pki, ca=None, zero_config=False,
                 extra=()):
        self.proxy = CountingProxy("127.0.0.1", int(minio.endpoint.rsplit(":", 1)[1]))
        env = dict(os.environ, **minio.env())
        env.pop("AWS_ENDPOINT_URL_S3", None)
        env.pop("AWS_ENDPOINT_URL", None)
        peer = None if zero_config else (*pki["issue"](node_id), ca or pki["ca"])
        try:
            super().__init__(bin_, tmp, lock, node_id, env,
                             ["--endpoint", self.proxy.endpoint, *(["--peer"] if zero_config
                                                                  else []), *extra, *TIMING],
                             cmd=["sleep", "600"], peer=peer)
        except BaseException:
            self.proxy.close()
            raise
        self.port = self.peer_port  # --addr (None with zero_config)

    def stop(self):
        try:
            super().stop()
        finally:
            self.proxy.close()


@pytest.fixture
def peer_cluster(s3lect_bin, minio, tmp_path, pki, request):
    """Starts nodes with a CA and certificates, or zero-config ones when the
    test is parametrized with peer_cluster = "zero-config"."""
    nodes: list[PeerNode] = []
    zero = getattr(request, "param", "ca") == "zero-config"
    lock = f"s3://{minio.bucket}/peer/{re.sub(r'[^A-Za-z0-9_.-]', '_', request.node.name)}.json"

    def start(n=3, bad_ca=False):
        """Starts n more nodes; with bad_ca they trust an unrelated CA."""
        for _ in range(n):
            nid = f"p{len(nodes)}"
            ca = pki["other-ca"] if bad_ca else None
            nodes.append(PeerNode(s3lect_bin, tmp_path, minio, lock, nid, pki, ca, zero))
        return nodes
    start.lock = lock
    yield start
    for n in nodes:
        n.stop()


@pytest.mark.parametrize("peer_cluster", ["ca", "zero-config"], indirect=True)
def test_followers_make_no_s3_requests_when_stable(peer_cluster):
    nodes = peer_cluster()
    leader = wait_for(lambda: only_leader(nodes), 20, "one leader")
    time.sleep(4)  # followers reach the stable state and start long-polling
    before = {n.id: n.proxy.snapshot() for n in nodes}
    window = 10.0
    time.sleep(window)
    after = {n.id: n.proxy.snapshot() for n in nodes}
    assert only_leader(nodes) is leader, "leadership stayed put"
    for n in nodes:
        d = after[n.id] - before[n.id]
        if n is leader:
            assert d["GET"] == 0, f"the leader made {d['GET']} GETs (renewals need none)"
            assert 7 <= d["PUT"] <= 13, f"the leader made {d['PUT']} PUTs in {window}s at 1/s"
        else:
            total = sum(d.values())
            assert total == 0, f"follower {n.id} made {dict(d)} S3 requests while stable"
    per_hour = {n.id: {k: round(v * 3600 / window) for k, v in (after[n.id] - before[n.id]).items()}
                for n in nodes}
    print(f"S3 requests per hour in peer mode: {per_hour}")


@pytest.mark.parametrize("peer_cluster", ["ca", "zero-config"], indirect=True)
def test_release_is_noticed_at_once(peer_cluster):
    nodes = peer_cluster()
    old = wait_for(lambda: only_leader(nodes), 20, "one leader")
    time.sleep(4)
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.proc.send_signal(signal.SIGTERM)
    assert old.proc.wait(timeout=10) == 0
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), 10, "a new leader")
    took = time.monotonic() - t0
    assert new.terms()[-1] > term
    # Stable followers wait infrequent (2 s) between S3 reads without peer mode; the
    # long-poll's 404 makes them read S3 at once.
    assert took < 1.5, f"handover took {took:.2f}s"
    print(f"peer-mode SIGTERM handover: {took:.2f}s")


@pytest.mark.parametrize("peer_cluster", ["ca", "zero-config"], indirect=True)
def test_crash_falls_back_to_s3_and_fails_over(peer_cluster):
    nodes = peer_cluster()
    old = wait_for(lambda: only_leader(nodes), 20, "one leader")
    time.sleep(4)
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.kill9()
    new = wait_for(lambda: only_leader([n for n in nodes if n is not old]), 20, "a new leader")
    took = time.monotonic() - t0
    assert new.terms()[-1] > term
    assert took < 3 + 0.5 + 2, f"failover took {took:.2f}s (bound: lease + frequent + slack)"
    print(f"peer-mode kill -9 failover: {took:.2f}s")


def test_follower_that_cannot_verify_the_leader_uses_s3(peer_cluster):
    nodes = peer_cluster(2)
    leader = wait_for(lambda: only_leader(nodes), 20, "one leader")
    nodes = peer_cluster(1, bad_ca=True)   # joins as a follower of a live leader
    bad = nodes[2]
    time.sleep(4)
    b0 = bad.proxy.snapshot()
    time.sleep(6)
    d = bad.proxy.snapshot() - b0
    assert d["GET"] >= 3, f"the follower that cannot verify the leader must poll S3 ({dict(d)})"
    assert only_leader(nodes) is leader, "and the election is undisturbed"


def served_key_pin(addr: str, tmp: Path) -> str:
    """The pin (pki.spki_pin) of the certificate served at addr."""
    host, port = addr.rsplit(":", 1)
    pem = tmp / f"served-{port}.pem"
    pem.write_text(ssl.get_server_certificate((host, int(port)), timeout=10))
    return spki_pin(pem)


def lock_record(minio, lock: str) -> dict:
    bucket, key = lock[len("s3://"):].split("/", 1)
    r = minio.client().get(bucket, key)
    assert r.status == 200, f"GET {lock}: HTTP {r.status}"
    return json.loads(r.body)


@pytest.mark.parametrize("peer_cluster", ["zero-config"], indirect=True)
def test_zero_config_record_pins_the_key_the_leader_serves(peer_cluster, minio, tmp_path):
    nodes = peer_cluster()
    leader = wait_for(lambda: only_leader(nodes), 20, "one leader")
    rec = wait_for(lambda: (lambda r: r if r.get("leaderID") == leader.id else None)(
        lock_record(minio, peer_cluster.lock)), 10, "the leader's record")
    pin = rec.get("peerKeySha256", "")
    assert len(pin) == 44 and pin.endswith("="), f"record without a key fingerprint: {rec}"
    host, port = rec["leaderAddr"].rsplit(":", 1)
    assert host == "127.0.0.1", f"advertised {rec['leaderAddr']}: not the route to MinIO"
    assert served_key_pin(rec["leaderAddr"], tmp_path) == pin, "the record names another key"
    # A self-signed certificate: nothing but the pin can authenticate it.
    ctx = ssl.create_default_context()
    with pytest.raises(ssl.SSLError):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            ctx.wrap_socket(sock, server_hostname=host)
    # Every leader makes its own key: the next one publishes another.
    leader.proc.send_signal(signal.SIGTERM)
    assert leader.proc.wait(timeout=10) == 0
    nxt = wait_for(lambda: only_leader([n for n in nodes if n is not leader]), 10, "a new leader")
    rec2 = wait_for(lambda: (lambda r: r if r.get("leaderID") == nxt.id else None)(
        lock_record(minio, peer_cluster.lock)), 10, "the new leader's record")
    assert rec2["peerKeySha256"] != pin, "a new leader published the old key"
    assert served_key_pin(rec2["leaderAddr"], tmp_path) == rec2["peerKeySha256"]


@pytest.mark.parametrize("flags, words", [
    (["--peer-cert", "cert.pem"], "both peer_cert and peer_key"),
    (["--peer-key", "key.pem"], "both peer_cert and peer_key"),
    (["--peer-client-cert", "client.pem"], "zero-config peer mode does not verify clients"),
])
def test_zero_config_refuses_half_configured_tls(s3lect_bin, tmp_path, flags, words):
    for f in ("cert.pem", "key.pem", "client.pem"):
        (tmp_path / f).write_text("-----BEGIN CERTIFICATE-----\n")
    r = subprocess.run([str(s3lect_bin), "run", "--lock", f"file://{tmp_path}/lock", "--peer",
                        *flags, "--", "true"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode != 0 and words in r.stderr, (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1, f"one clear line: {r.stderr!r}"


def test_zero_config_stale_fingerprint_after_leader_change(s3lect_bin, minio, tmp_path, pki):
    """The leader dies and a new process binds its address at once. The new
    process reads the old record, which names its own address with the dead
    leader's key: its check is refused (tlsPin, reported; the followers that
    were polling the dead leader saw a refused connection instead) and it
    reads S3. Once a new leader writes its own key, every follower follows it
    through the peer again (no S3 requests when stable)."""
    lock = f"s3://{minio.bucket}/peer/stale-fingerprint.json"
    port = free_port()
    nodes = []
    try:
        def node(nid, fixed=False):
            extra = ["--peer-listen", f"127.0.0.1:{port}"] if fixed else []
            nodes.append(PeerNode(s3lect_bin, tmp_path, minio, lock, nid, pki, zero_config=True,
                                  extra=extra))
            return nodes[-1]
        old = node("z0", fixed=True)
        wait_for(lambda: old.leading(), 20, "the node on the fixed port leads")
        followers = [node("z1"), node("z2")]
        wait_for(lambda: all("leader is z0" in f.text() for f in followers), 20, "followers")
        time.sleep(3)  # stable: long-polling z0 with its key pinned
        old_pin = lock_record(minio, lock)["peerKeySha256"]
        old.kill9()
        new = node("z3", fixed=True)  # same address, another key
        wait_for(lambda: "peer mode (tlsPin)" in new.text(), 15,
                 "the new process reports the stale fingerprint")
        everyone = followers + [new]
        leader = wait_for(lambda: only_leader(everyone), 20, "a new leader")
        rec = wait_for(lambda: (lambda r: r if r.get("leaderID") == leader.id else None)(
            lock_record(minio, lock)), 10, "the new leader's record")
        assert rec["peerKeySha256"] != old_pin
        time.sleep(4)
        before = {n.id: n.proxy.snapshot() for n in everyone}
        time.sleep(6)
        assert only_leader(everyone) is leader, "leadership stayed put"
        for n in everyone:
            if n is not leader:
                d = n.proxy.snapshot() - before[n.id]
                assert sum(d.values()) == 0, (
                    f"{n.id} made {dict(d)} S3 requests: it does not follow the new key")
        line = next(ln for ln in new.text().splitlines() if "(tlsPin)" in ln)
        assert old_pin not in line and "peerKeySha256" in line, line
    finally:
        for n in nodes:
            n.stop()


class Impostor:
    """A TLS server with a certificate from the cluster's CA for another name,
    answering every check as the leader `victim` would, with a new etag each
    time (after half a second, like a long poll that sees a renewal)."""

    def __init__(self, port: int, cert_key: tuple[Path, Path], victim: str):
        import http.server
        import threading
        imp = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                imp.requests += 1
                time.sleep(0.5)
                body = json.dumps({
                    "leaderID": victim, "leaderAddr": f"127.0.0.1:{port}",
                    "lastUpdated": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                    "term": 1, "leaseMs": 3000, "etag": f'"forged-{imp.requests}"'}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*map(str, cert_key))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_answers_count_only_from_the_holder_the_record_names(s3lect_bin, minio, tmp_path, pki):
    """Issue 26 item 5. In CA mode another process at the leader's advertised
    address, with a certificate from the same CA (for another name), answers
    every check as the leader with a new etag. Its answers must not count:
    each check fails as tlsId (reported once, naming what the certificate
    presents and the id the record names), the follower follows through S3,
    and when the real leader is killed it takes over within lease + frequent
    interval. (The leader listens elsewhere, so the follower meets the
    impostor at its check, not only in a race after the kill.)"""
    lock = f"s3://{minio.bucket}/peer/impostor.json"
    nodes, imp = [], None
    try:
        leader = PeerNode(s3lect_bin, tmp_path, minio, lock, "v0", pki,
                          extra=["--peer-listen", f"127.0.0.1:{free_port()}"])
        nodes.append(leader)
        imp = Impostor(leader.port, pki["issue"]("intruder"), "v0")  # at v0's --addr
        wait_for(leader.leading, 20, "v0 leads")
        follower = PeerNode(s3lect_bin, tmp_path, minio, lock, "v1", pki)
        nodes.append(follower)
        # One check: a failed one sends the follower to S3 for 5 minutes.
        wait_for(lambda: imp.requests >= 1, 20, "the follower to ask the impostor")
        time.sleep(2)
        assert leader.leading() and not follower.leading()
        t0 = time.monotonic()
        leader.kill9()
        wait_for(follower.leading, 20, "the follower to take over despite the impostor")
        took = time.monotonic() - t0
        assert took < 3 + 0.5 + 2, f"takeover took {took:.2f}s (bound: lease + frequent + slack)"
        lines = [ln for ln in follower.text().splitlines() if "peer mode (tlsId)" in ln]
        assert len(lines) == 1, f"one tlsId line, not one per check:\n{follower.text()}"
        line = lines[0]
        assert "presents CN=intruder" in line and "'v0'" in line, line
        assert f"127.0.0.1:{leader.port}" in line and "--peer-cert" in line, line
        print(f"takeover past an impostor: {took:.2f}s; impostor asked {imp.requests} times")
    finally:
        for n in nodes:
            n.stop()
        if imp:
            imp.stop()
