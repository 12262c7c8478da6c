# SPDX-License-Identifier: Apache-2.0
"""`s3lect run --metrics-listen`: a real scrape of the Prometheus endpoint,
parsed by prometheus_client's own parser (issue 19, Metrics).

Two nodes on a file lock: the leader reports s3lect_leader 1 and its renewals,
the follower 0 and its reads; after a SIGTERM handover the new leader reports
the change. The endpoint must not delay the supervisor (a client that never
sends a request), must not leak into the supervised command (close-on-exec),
and refuses other paths and methods. Every process has a timeout.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from harness import cli
from harness.servers import free_port

prom_parser = pytest.importorskip(
    "prometheus_client.parser",
    reason="prometheus_client is missing: scripts/deps installs it (pip install prometheus_client)")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "300ms", "--infrequent-interval", "600ms",
          "--kill-timeout", "300ms"]


class MetricsNode(cli.Node):
    """A harness Node on the file lock with --metrics-listen, its scrapes
    parsed by prometheus_client's parser."""

    def __init__(self, tmp: Path, lock: str, nid: str, cmd: list[str] | None = None):
        super().__init__(BIN, tmp, lock, nid, cli.node_env(), TIMING, cmd=cmd or ["sleep", "60"],
                         kill_timeout=None, metrics=True, stdout=subprocess.DEVNULL)

    def scrape(self) -> dict:
        samples = {}
        for fam in prom_parser.text_string_to_metric_families(self.metrics_text()):
            for s in fam.samples:
                samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return samples

    def value(self, samples: dict, name: str, **labels) -> float | None:
        want = dict(labels, lock=self.lock, id=self.id)
        return samples.get((name, tuple(sorted(want.items()))))


@pytest.fixture
def nodes(tmp_path):
    made: list[MetricsNode] = []
    lock = f"file://{tmp_path}/lock.json"

    def make(nid: str, cmd=None) -> MetricsNode:
        made.append(MetricsNode(tmp_path, lock, nid, cmd))
        return made[-1]
    yield make
    for n in made:
        n.stop()


def wait_for(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            v = cond()
        except (OSError, urllib.error.URLError):
            v = None
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_scrape_leader_and_follower_and_handover(nodes):
    a = nodes("a")
    wait_for(lambda: a.value(a.scrape(), "s3lect_leader") == 1, 15, "a leads")
    b = nodes("b")
    wait_for(lambda: b.value(b.scrape(), "s3lect_store_requests_total", op="get",
                             outcome="ok"), 15, "b reads the lock")
    time.sleep(1.5)
    sa, sb = a.scrape(), b.scrape()
    assert a.value(sa, "s3lect_leader") == 1 and b.value(sb, "s3lect_leader") == 0
    term = a.value(sa, "s3lect_term")
    assert term == b.value(sb, "s3lect_term") > 10**12  # the creator's clock in ms
    assert a.value(sa, "s3lect_leadership_transitions_total", reason="acquired") == 1
    puts = a.value(sa, "s3lect_store_requests_total", op="put", outcome="ok")
    assert puts >= 3, puts
    assert a.value(sa, "s3lect_store_request_duration_seconds_count", op="put") >= puts
    assert 0 <= a.value(sa, "s3lect_seconds_since_last_renewal") < 1.5
    assert b.value(sb, "s3lect_seconds_since_last_renewal") is None
    assert a.value(sa, "s3lect_store_requests_total", op="get", outcome="ok") is not None
    assert ("s3lect_credential_fetches_total", (("result", "ok"),)) in sa

    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(timeout=15) == 0
    wait_for(lambda: b.value(b.scrape(), "s3lect_leader") == 1, 15, "b leads after the handover")
    sb = b.scrape()
    assert b.value(sb, "s3lect_term") == term + 1
    assert b.value(sb, "s3lect_leadership_transitions_total", reason="acquired") == 1
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", a.metrics_port), timeout=2).close()


def test_a_silent_client_delays_neither_scrapes_for_long_nor_the_supervisor(nodes):
    a = nodes("a")
    wait_for(lambda: a.value(a.scrape(), "s3lect_leader") == 1, 15, "a leads")
    silent = [socket.create_connection(("127.0.0.1", a.metrics_port), timeout=5) for _ in range(3)]
    try:
        t0 = time.monotonic()
        a.proc.send_signal(signal.SIGTERM)
        assert a.proc.wait(timeout=15) == 0
        took = time.monotonic() - t0
        assert took < 3, f"stop took {took:.2f}s with silent metrics clients"
    finally:
        for s in silent:
            s.close()


def test_the_command_does_not_inherit_the_port(nodes, tmp_path):
    out = tmp_path / "fds.txt"
    a = nodes("a", ["sh", "-c", f"ls -l /proc/$$/fd > {out}; sleep 60"])
    wait_for(lambda: out.exists() and out.stat().st_size > 0, 15, "the command lists its fds")
    fds = out.read_text()
    assert "socket:" not in fds, f"the supervised command inherited a socket:\n{fds}"
    assert a.value(a.scrape(), "s3lect_leader") == 1


def test_other_paths_and_methods(nodes):
    a = nodes("a")
    wait_for(lambda: a.scrape(), 15, "the endpoint")
    base = f"http://127.0.0.1:{a.metrics_port}"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/", timeout=5)
    assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(base + "/metrics", data=b"x"), timeout=5)
    assert e.value.code == 405
    r = urllib.request.urlopen(urllib.request.Request(base + "/metrics", method="HEAD"),
                               timeout=5)
    assert r.status == 200 and r.read() == b""


def test_bad_listen_addresses(tmp_path):
    env = cli.node_env()
    r = subprocess.run([str(BIN), "run", "--lock", f"file://{tmp_path}/l", "--metrics-listen",
                        "nonsense", "--", "true"], env=env, capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 2 and "--metrics-listen 'nonsense' is not HOST:PORT" in r.stderr
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = subprocess.run([str(BIN), "run", "--lock", f"file://{tmp_path}/l",
                            "--metrics-listen", f"127.0.0.1:{port}", "--", "true"], env=env,
                           capture_output=True, text=True, timeout=20)
    assert r.returncode == 1 and "cannot listen" in r.stderr, r
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "l").exists(), "the election must not start when the port is taken"


def test_descriptors_given_to_s3lect_still_reach_the_command(tmp_path):
    """s3lect's own descriptors are close-on-exec for the command, but one the
    caller passed on (a shell's 3>file, socket activation) is not."""
    r, w = os.pipe()
    env = cli.node_env()
    p = subprocess.Popen([str(BIN), "run", "--lock", f"file://{tmp_path}/l", "--id", "fd",
                          *TIMING, "--metrics-listen", f"127.0.0.1:{free_port()}", "--", "bash",
                          "-c", f"echo passed-on >&{w}; ls -l /proc/$$/fd >&{w}"],
                         pass_fds=(w,), env=env, stdout=subprocess.DEVNULL,
                         stderr=open(tmp_path / "fd.log", "w"), start_new_session=True)
    os.close(w)
    try:
        assert p.wait(timeout=15) == 0, (tmp_path / "fd.log").read_text()
        os.set_blocking(r, False)
        data = b""
        while True:
            try:
                chunk = os.read(r, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        text = data.decode()
        assert text.startswith("passed-on"), text
        assert "socket:" not in text, f"an s3lect socket reached the command:\n{text}"
    finally:
        os.close(r)
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def test_one_lock_one_series_whatever_the_spelling(tmp_path):
    """Issue 26 item 11: `FILE:///X` and the plain path `X/./` (as two nodes
    of one cluster may spell it) give one `lock` label, so that
    `sum by (lock) (s3lect_leader)` is 1 while a leader exists."""
    spellings = [f"FILE://{tmp_path}/lock.json", f"{tmp_path}/.//lock.json"]
    made = [MetricsNode(tmp_path, lock, nid) for lock, nid in zip(spellings, ("a", "b"))]
    try:
        canonical = f"file://{tmp_path}/lock.json"
        for n in made:
            n.lock = canonical  # the label every node must use
        wait_for(lambda: sum(n.value(n.scrape(), "s3lect_leader") or 0 for n in made) == 1, 15,
                 "one leader, counted under one lock label")
        wait_for(lambda: all(n.value(n.scrape(), "s3lect_leader") is not None for n in made),
                 15, "both nodes' series under the canonical label")
        locks = {dict(labels).get("lock") for n in made for (name, labels) in n.scrape()
                 if name == "s3lect_leader"}
        assert locks == {canonical}, locks
    finally:
        for n in made:
            n.stop()
