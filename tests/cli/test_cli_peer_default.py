# SPDX-License-Identifier: Apache-2.0
"""`s3lect run` has peer mode on by default (issue 28 item 1).

Two nodes on a file lock with default flags: the leader writes its endpoint
and key fingerprint into the record, and the follower long-polls it instead
of reading the store (metrics: peer answers grow, store reads stay flat).
A leader that advertises a port nobody listens on (what a firewall or a NAT
does to a follower): the follower falls back to store reads at the frequent
interval and says so once, naming how to open the port or turn peer mode
off. `--no-peer` and `S3LECT_PEER=0` turn it off: no key in the record, no
listening socket. Every process has a timeout and is killed at the end.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness import cli
from harness.servers import free_port

prom_parser = pytest.importorskip(
    "prometheus_client.parser",
    reason="prometheus_client is missing: scripts/deps installs it (pip install prometheus_client)")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
# lease 3 s, renew 500 ms, frequent 300 ms, infrequent 2 s
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "300ms", "--infrequent-interval", "2s",
          "--kill-timeout", "300ms"]


class PeerDefaultNode(cli.Node):
    """A harness Node on the file lock at TIMING (a flag in extra replaces
    TIMING's: a flag may be given once) with --metrics-listen and env_add
    over cli.node_env()."""

    def __init__(self, tmp: Path, lock: str, nid: str, extra: list[str], env_add=None):
        timing = [x for i in range(0, len(TIMING), 2) if TIMING[i] not in extra
                  for x in TIMING[i:i + 2]]
        super().__init__(BIN, tmp, lock, nid, cli.node_env(**(env_add or {})), [*timing, *extra],
                         cmd=["sleep", "60"], kill_timeout=None, metrics=True,
                         stdout=subprocess.DEVNULL)

    def scrape(self) -> dict:
        try:
            text = self.metrics_text()
        except OSError:  # not listening yet
            return {}
        out = {}
        for fam in prom_parser.text_string_to_metric_families(text):
            for s in fam.samples:
                lab = dict(s.labels)
                lab.pop("lock", None)
                lab.pop("id", None)
                out[(s.name, tuple(sorted(lab.items())))] = s.value
        return out

    def gets(self) -> float:
        m = self.scrape()
        return sum(v for (n, lab), v in m.items()
                   if n == "s3lect_store_requests_total" and ("op", "get") in lab)

    def peer(self, result: str) -> float:
        return self.scrape().get(("s3lect_peer_checks_total", (("result", result),)), 0.0)


@pytest.fixture
def nodes(tmp_path):
    made: list[PeerDefaultNode] = []
    lock = f"file://{tmp_path}/lock.json"

    def make(nid: str, extra=(), env=None) -> PeerDefaultNode:
        n = PeerDefaultNode(tmp_path, lock, nid, list(extra), env)
        made.append(n)
        return n

    make.lock_path = tmp_path / "lock.json"
    yield make
    for n in made:
        n.stop()


def wait_for(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def record(path: Path) -> dict:
    return json.loads(path.read_text())


def test_default_is_peer_mode(nodes):
    a = nodes("a")
    wait_for(lambda: "started command" in a.text(), 10, "a to lead")
    rec = record(nodes.lock_path)
    assert rec.get("peerKeySha256") and rec["leaderAddr"].startswith("127.0.0.1:"), rec
    port = int(rec["leaderAddr"].rsplit(":", 1)[1])
    assert port in a.listening_ports(), (port, a.listening_ports())
    b = nodes("b")
    wait_for(lambda: b.peer("answer") >= 2, 10, "b's long polls answered by a")
    g0, p0 = b.gets(), b.peer("answer")
    time.sleep(4)  # 8 renewals; without peer mode b would read every 2 s
    g1, p1 = b.gets(), b.peer("answer")
    # A batched long poll is answered at every renewal (every 500 ms), so
    # that b's lease clock runs from the leader's last renewal (issue 44).
    assert p1 - p0 >= 5, f"b hears every renewal: {p1 - p0} answers in 4 s (8 renewals)"
    assert g1 - g0 <= 1, f"b reads the store no more: {g1 - g0} reads in 4 s"
    assert "peer mode" not in b.text(), b.text()
    # The handover on SIGTERM reaches b through its long poll at once.
    t0 = time.monotonic()
    a.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "started command" in b.text(), 5, "b to take over")
    assert time.monotonic() - t0 < 2.5


@pytest.mark.parametrize("mode", ["peer", "no-peer"])
def test_frozen_leader_is_replaced_at_its_lease(nodes, mode):
    """SIGSTOP of the leader's s3lect (a frozen host: no reset reaches the
    follower, whose long poll stays open): the follower takes over by the end
    of the lease of the last record it saw plus its frequent interval (issue
    38 item 1), never by the long poll's wait plus peer_timeout. --no-peer
    with an infrequent interval of 10 s: a stable follower reads again by
    the lease's end, not 10 s later (the file store gives no clock, so it
    saw the last renewal up to a lease late: 2 L + frequent)."""
    extra = [] if mode == "peer" else ["--no-peer", "--infrequent-interval", "10s"]
    a = nodes("a", extra)
    wait_for(lambda: "started command" in a.text(), 10, "a to lead")
    b = nodes("b", extra)
    if mode == "peer":
        wait_for(lambda: b.peer("answer") >= 3, 10, "b's long polls answered by a")
    else:
        wait_for(lambda: b.gets() >= 2, 10, "b to read the lock twice")
        time.sleep(1.5)
    t0 = time.monotonic()
    a.proc.send_signal(signal.SIGSTOP)  # s3lect alone: its shim kills the command at the deadline
    try:
        bound = 3 + 0.3 + 1.0 if mode == "peer" else 2 * 3 + 0.3 + 1.0
        wait_for(lambda: "started command" in b.text(), bound + 10, "b to take over")
        took = time.monotonic() - t0
        assert took <= bound, f"{mode}: b took over {took:.2f} s after a froze (bound {bound} s)"
        assert took >= 3 - 0.5 - 0.6, f"{mode}: b took over {took:.2f} s after a froze, before a's lease ended"
    finally:
        a.proc.send_signal(signal.SIGCONT)


def test_unreachable_endpoint_falls_back_and_says_so_once(nodes):
    closed = free_port()  # nothing listens here: what a firewall makes of the leader's port
    a = nodes("a", ["--addr", f"127.0.0.1:{closed}", "--peer-listen", f"127.0.0.1:{free_port()}"])
    wait_for(lambda: "started command" in a.text(), 10, "a to lead")
    assert record(nodes.lock_path)["leaderAddr"] == f"127.0.0.1:{closed}"
    b = nodes("b")
    said = wait_for(lambda: [ln for ln in b.text().splitlines() if "cannot be reached" in ln],
                    10, "b's fallback message")
    line = said[0]
    assert f"127.0.0.1:{closed}" in line and f"open port {closed}" in line, line
    assert "--no-peer" in line and "frequent_interval (300 ms)" in line, line
    g0 = b.gets()
    time.sleep(3)
    g1 = b.gets()
    # frequent 300 ms: about 10 reads in 3 s (infrequent 2 s would be 1 or 2)
    assert 5 <= g1 - g0 <= 16, f"b reads the store every frequent interval: {g1 - g0} in 3 s"
    fails = b.peer("failed")
    assert fails == 1, f"one failed check, then the store until the retry (5 min): {fails}"
    lines = [ln for ln in b.text().splitlines() if "peer mode" in ln]
    assert len(lines) == 1, lines
    # And b still takes over when a stops.
    a.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "started command" in b.text(), 6, "b to take over")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_no_peer_turns_it_off(nodes, how):
    a = nodes("a", ["--no-peer"] if how == "flag" else [], {"S3LECT_PEER": "0"} if how == "env"
              else None)
    wait_for(lambda: "started command" in a.text(), 10, "a to lead")
    rec = record(nodes.lock_path)
    assert "peerKeySha256" not in rec and rec["leaderAddr"] == "", rec
    assert a.listening_ports() == {a.metrics_port}, f"only the metrics port: {a.listening_ports()}"


def _netns_ok() -> str | None:
    """None when `unshare -rn` makes a network namespace here, else why not."""
    try:
        r = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare -rn cannot run: {e}"
    return None if r.returncode == 0 else f"unshare -rn failed: {r.stderr.decode().strip()}"


@pytest.mark.parametrize("asked", [False, True])
def test_endpoint_that_cannot_start(tmp_path, asked):
    """In a network namespace of its own (no route anywhere, nothing leaves
    it) the store's host cannot be routed to, so the default endpoint has no
    address: `s3lect run` warns and runs without peer mode; with --peer
    asked for, it exits saying why."""
    why = _netns_ok()
    if why:
        pytest.skip(why)
    env = cli.node_env(AWS_ACCESS_KEY_ID="AKIDTHROWAWAY",
                       AWS_SECRET_ACCESS_KEY="throwaway-secret", AWS_REGION="us-east-1")
    log = tmp_path / "run.log"
    argv = ["unshare", "-rn", str(BIN), "run", "--lock", "s3://bucket/key",
            "--endpoint", "http://10.1.2.3:9000", "--id", "n1", *TIMING,
            *(["--peer"] if asked else []), "--", "sleep", "60"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w"), env=env,
                         start_new_session=True)
    try:
        if asked:
            assert p.wait(timeout=20) == 1
            text = log.read_text()
            assert "cannot start: peer mode" in text and "server_addr" in text, text
        else:
            wait_for(lambda: "running without peer mode" in log.read_text(), 15, "the warning")
            time.sleep(1)
            assert p.poll() is None, log.read_text()
            text = log.read_text()
            assert "--no-peer" in text and "following s3://bucket/key as n1" in text, text
            assert "throwaway-secret" not in text
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)


SCRAPE_IN_NS = r"""
import os, subprocess, sys, time, urllib.request
argv, log = sys.argv[1:-1], sys.argv[-1]
p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                     start_new_session=True)
try:
    end = time.monotonic() + 15
    while time.monotonic() < end and "metrics at" not in open(log).read():
        time.sleep(0.1)
    port = open(log).read().split("port=")[1].split()[0] if "port=" in open(log).read() else 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        sys.stdout.write(r.read().decode())
finally:
    os.killpg(p.pid, 9)
    p.wait(timeout=10)
"""


def test_endpoint_that_cannot_start_with_metrics(tmp_path):
    """The fallback replaces the elector: --metrics-listen, started before,
    must serve the new one (its lock, its id), not the freed one."""
    why = _netns_ok()
    if why:
        pytest.skip(why)
    if not shutil.which("ip"):
        pytest.skip("the ip command (iproute2) is missing: needed to bring up lo in the namespace")
    env = cli.node_env(AWS_ACCESS_KEY_ID="AKIDTHROWAWAY",
                       AWS_SECRET_ACCESS_KEY="throwaway-secret", AWS_REGION="us-east-1")
    log = tmp_path / "run.log"
    script = tmp_path / "scrape.py"
    script.write_text(SCRAPE_IN_NS)
    run = [str(BIN), "run", "--lock", "s3://bucket/key", "--endpoint", "http://10.1.2.3:9000",
           "--id", "n1", *TIMING, "--metrics-listen", "127.0.0.1:9464", "--", "sleep", "60"]  # the netns is ours
    inner = f"ip link set lo up && exec {sys.executable} {script} " + " ".join(
        f"'{a}'" for a in run + [str(log)])
    r = subprocess.run(["unshare", "-rn", "sh", "-c", inner], capture_output=True, text=True,
                       env=env, timeout=60)
    text = log.read_text() if log.exists() else ""
    assert r.returncode == 0, (r.stdout, r.stderr, text)
    assert "running without peer mode" in text, text
    assert 's3lect_leader{lock="s3://bucket/key",id="n1"} 0' in r.stdout, r.stdout[:2000]


def test_full_connection_table_is_named(nodes):
    """Issue 38 item 11b: a leader whose peer endpoint's connection table is
    full (512 connections, here held by raw TCP clients that never start
    TLS) closes a follower's connection before the handshake. The follower
    says the table is full, not that the port "cannot be reached"
    (firewall)."""
    a = nodes("a")
    wait_for(lambda: "started command" in a.text(), 10, "a to lead")
    port = int(record(nodes.lock_path)["leaderAddr"].rsplit(":", 1)[1])
    held: list[socket.socket] = []
    try:
        for _ in range(560):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            held.append(s)
        b = nodes("b")
        wait_for(lambda: "connection table is most likely full" in b.text(), 20,
                 "b to say the leader's connection table is full")
        assert "open port" not in b.text(), b.text()
    finally:
        for s in held:
            s.close()
