# SPDX-License-Identifier: Apache-2.0
"""`s3lect run --metrics-listen`: GET /leader and GET /healthz through real
HTTP (issue 42 item 3), for a Kubernetes readiness probe that sends a
Service's traffic to the leader only, and a liveness probe.

Nodes are real `s3lect run` processes on a file lock. /leader must answer
200 on exactly one node, only once its command runs, never on two nodes at
once during a SIGTERM handover, and never on a node that lost its lease
(frozen past it, then thawed). /healthz answers 200 on a healthy leader and
follower and 503 while s3lect run stops. HEAD works; other paths are 404.
Every request and process has a timeout; every process is stopped.
"""
from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import time
from pathlib import Path

import pytest
from harness import cli
from harness.cli import running_commands
from harness.freeze import thaw

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "300ms", "--infrequent-interval", "600ms"]


class LeaderNode(cli.Node):
    """A harness Node on the file lock with --metrics-listen; get() asks
    its endpoint."""

    def __init__(self, tmp: Path, lock: str, nid: str, cmd: list[str],
                 timing: list[str] | None = None, kill_timeout: str = "300ms"):
        super().__init__(BIN, tmp, lock, nid, cli.node_env(S3LECT_NEW_LOCK_WAIT="0"),
                         timing or TIMING, cmd=cmd, kill_timeout=kill_timeout, metrics=True)

    def get(self, path: str, method: str = "GET", timeout: float = 2.0):
        """(status, JSON body or raw bytes, headers); None when nothing answers."""
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            raw = r.read()
            body = raw
            if r.getheader("Content-Type") == "application/json" and raw:
                body = json.loads(raw)
            return r.status, body, r
        except OSError:
            return None
        finally:
            conn.close()

    def leader_status(self) -> int | None:
        a = self.get("/leader")
        return a[0] if a else None


@pytest.fixture
def nodes(tmp_path):
    made: list[LeaderNode] = []
    lock = f"file://{tmp_path}/lock.json"

    def make(nid: str, cmd: list[str], **kw) -> LeaderNode:
        made.append(LeaderNode(tmp_path, lock, nid, cmd, **kw))
        return made[-1]
    yield make
    for n in made:
        n.stop()


def sleeper(tag: str, n: int) -> list[str]:
    """A command whose process /proc shows as `sleep <tag><n>` once exec'd."""
    return ["sleep", f"{tag}{n}"]


def all_threads_stopped(pid: int) -> bool:
    """Every thread of pid is in the stopped state (T)."""
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            states.append(stat.rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return bool(states) and all(st in ("T", "t") for st in states)


def new_tag() -> str:
    return f"{60000 + secrets.randbelow(9000)}"  # a sleep argument no other process uses


def wait_answer(node: LeaderNode, path: str, cond, timeout: float, what: str):
    return cli.wait_for(lambda: (lambda a: a if a and cond(a[0], a[1]) else None)(
        node.get(path)), timeout, what)


def test_exactly_one_node_answers_200_and_both_name_the_leader(nodes):
    tag = new_tag()
    a = nodes("a", sleeper(tag, 1))
    wait_answer(a, "/leader", lambda s, b: s == 200, 15, "a leads with its command running")
    b = nodes("b", sleeper(tag, 2))
    wait_answer(b, "/leader", lambda s, b: b["leaderId"] == "a", 15, "b follows a")
    sa, ba, ra = a.get("/leader")
    sb, bb, rb = b.get("/leader")
    assert (sa, sb) == (200, 503), (ba, bb)
    assert ra.getheader("Content-Type") == "application/json"
    assert ra.getheader("Cache-Control") == "no-store"
    assert ba["leader"] is True and ba["id"] == "a" and ba["command"] == "running", ba
    assert ba["state"] == "leader", ba
    assert bb["leader"] is False and bb["id"] == "b" and bb["command"] == "stopped", bb
    assert ba["leaderId"] == bb["leaderId"] == "a"
    assert ba["term"] == bb["term"] > 10**12, (ba, bb)  # the creator's clock in ms
    assert running_commands(tag) == [f"{tag}1"]


def test_sigterm_handover_never_two_200s_and_the_new_200_after_its_command(nodes):
    tag = new_tag()
    a = nodes("a", sleeper(tag, 1))
    wait_answer(a, "/leader", lambda s, b: s == 200, 15, "a leads with its command running")
    b = nodes("b", sleeper(tag, 2))
    _, first, _ = wait_answer(b, "/leader", lambda s, b: b["leaderId"] == "a", 15, "b follows a")
    a.proc.send_signal(signal.SIGTERM)
    end = time.monotonic() + 20
    seen_a: list[int | None] = []
    b_first_200 = None
    while time.monotonic() < end:
        sa = a.leader_status()
        got = b.get("/leader")
        seen_a.append(sa)
        assert not (sa == 200 and got and got[0] == 200), "both nodes answered 200 on /leader"
        if got and got[0] == 200:
            # At once: the new leader's command runs (exec'd: /proc names
            # its own program) and the old one's is gone.
            cmds = running_commands(tag)
            assert f"{tag}2" in cmds, f"b answered 200 before its command ran: {cmds}"
            assert f"{tag}1" not in cmds, f"b answered 200 while a's command ran: {cmds}"
            b_first_200 = got[1]
            break
        time.sleep(0.02)
    assert b_first_200 is not None, f"b never answered 200 on /leader; a said {seen_a[-5:]}"
    assert b_first_200["id"] == b_first_200["leaderId"] == "b", b_first_200
    assert b_first_200["term"] == first["term"] + 1, (b_first_200, first)
    assert b_first_200["command"] == "running"
    assert a.wait(timeout=15) == 0
    # a's 503s (while it stopped) came before b's 200; once gone, nothing answers
    assert seen_a[-1] in (503, None), seen_a
    assert a.get("/leader") is None


def test_lost_lease_the_thawed_node_never_answers_200(nodes):
    tag = new_tag()
    a = nodes("a", sleeper(tag, 1))
    wait_answer(a, "/leader", lambda s, b: s == 200, 15, "a leads with its command running")
    b = nodes("b", sleeper(tag, 2))
    wait_answer(b, "/leader", lambda s, b: b["leaderId"] == "a", 15, "b follows a")
    frozen = [a.pid]
    os.kill(a.pid, signal.SIGSTOP)  # s3lect run alone: its shim still kills at the hard deadline
    try:
        # kill() returns before every thread has stopped: wait until they have
        cli.wait_for(lambda: all_threads_stopped(a.pid), 5, "a's threads stopped")
        assert a.get("/leader", timeout=0.5) is None, "a frozen process answered"
        wait_answer(b, "/leader", lambda s, body: s == 200, 20, "b leads after a's lease")
    finally:
        thaw(frozen)
    # Thawed: its lease ran out long ago; it must not claim it, not even
    # before its loop noticed.
    end = time.monotonic() + 2
    answers = []
    while time.monotonic() < end:
        got = a.get("/leader")
        assert got is not None, "a thawed node's endpoint does not answer"
        assert got[0] == 503 and got[1]["leader"] is False, got[1]
        answers.append(got[1])
        time.sleep(0.02)
    assert answers[-1]["leaderId"] == "b" and answers[-1]["command"] == "stopped", answers[-1]
    got = a.get("/healthz")
    assert got is not None and got[0] in (200, 503) and "reason" in got[1], got
    wait_answer(a, "/healthz", lambda s, body: s == 200 and body["healthy"], 10,
                "the thawed follower is healthy")
    assert b.leader_status() == 200
    assert running_commands(tag) == [f"{tag}2"]


def test_healthz_200_on_leader_and_follower_503_while_stopping(nodes, tmp_path):
    # A command that takes its time to stop: s3lect run stays in its stop
    # (SIGTERM, kill timeout 2 s, SIGKILL) long enough to be seen.
    started = tmp_path / "started"
    cmd = ["sh", "-c", f"trap '' TERM; touch {started}; while :; do sleep 0.05; done"]
    a = nodes("a", cmd, timing=cli.SIGNAL_TIMING, kill_timeout="2s")
    wait_answer(a, "/leader", lambda s, b: s == 200, 20, "a leads with its command running")
    assert started.exists()
    b = nodes("b", ["sleep", "60"])
    wait_answer(b, "/leader", lambda s, body: body["leaderId"] == "a", 15, "b follows a")
    for n, cmd_state in ((a, "running"), (b, "stopped")):
        s, body, r = n.get("/healthz")
        assert s == 200 and r.getheader("Content-Type") == "application/json", body
        assert body["healthy"] is True and body["reason"] == "ok", body
        assert body["command"] == cmd_state and 0 <= body["supervisorAgeMs"] < 5000, body
    a.proc.send_signal(signal.SIGTERM)
    health = wait_answer(a, "/healthz", lambda s, body: s == 503, 5, "503 while a stops")
    assert health[1]["healthy"] is False and health[1]["reason"] == "s3lect run is stopping"
    s, body, _ = a.get("/leader")
    assert s == 503 and body["command"] == "stopping" and body["leader"] is False, body
    assert a.wait(timeout=20) == 0
    s, body, _ = b.get("/healthz")
    assert s == 200 and body["healthy"] is True, body


def test_head_and_unknown_paths(nodes):
    tag = new_tag()
    a = nodes("a", sleeper(tag, 1))
    wait_answer(a, "/leader", lambda s, b: s == 200, 15, "a leads with its command running")
    b = nodes("b", sleeper(tag, 2))
    wait_answer(b, "/leader", lambda s, body: body["leaderId"] == "a", 15, "b follows a")
    for n, want in ((a, 200), (b, 503)):
        s, body, r = n.get("/leader", method="HEAD")
        assert s == want and body == b"", body
        assert int(r.getheader("Content-Length")) > 0
        s, body, _ = n.get("/healthz", method="HEAD")
        assert s == 200 and body == b""
        s, body, _ = n.get("/leader?probe=1")
        assert s == want and body["leaderId"] == "a"
    for path in ("/leader/", "/leaderx", "/health", "/", "/healthz/x"):
        for method in ("GET", "HEAD"):
            s, _, _ = a.get(path, method=method)
            assert s == 404, (path, method, s)
    s, _, _ = a.get("/leader", method="POST")
    assert s == 405
