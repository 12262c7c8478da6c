# SPDX-License-Identifier: Apache-2.0
"""The s3lect CLI end to end on the embedded file store: real processes, real signals.

Timings are scaled down (lease 3 s) and bounds are generous for a loaded 2-core machine.
"""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.cli import Node
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"

FAST = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
        "--frequent-interval", "500ms"]


def cli(*args, timeout=20):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cluster(tmp_path):
    nodes = []

    def start(n=3, extra=FAST):
        lock = f"file://{tmp_path}/leader.json"
        for i in range(n):
            nodes.append(Node(BIN, tmp_path, lock, f"n{i}", None, extra))
        return nodes
    yield start
    for n in nodes:
        n.stop()


def leaders(nodes):
    return [n for n in nodes if n.proc.poll() is None and "started command" in n.text()
            and n.text().rfind("started command") > n.text().rfind("command exited")]


def test_help_and_version():
    r = cli("--help")
    assert r.returncode == 0 and "run --lock URL" in r.stdout
    r = cli("--version")
    assert r.returncode == 0 and re.match(r"s3lect \d+\.\d+\.\d+", r.stdout)
    for sub in ("run", "status", "watch"):
        r = cli(sub, "--help")
        assert r.returncode == 0 and f"usage: s3lect {sub}" in r.stdout, sub


@pytest.mark.parametrize("args,needle", [
    (["run", "--lock", "file:///tmp/x.json"], "missing command"),
    (["run", "--", "true"], "missing --lock"),
    (["run", "--lock", "ftp://x/y", "--", "true"], "unsupported lock URL scheme"),
    (["run", "--lock", "s3://bucket", "--", "true"], "needs a bucket and a key"),
    (["run", "--lock", "file:///tmp/x.json", "--lease-timeout", "soon", "--", "true"],
     "not a duration"),
    (["run", "--lock", "file:///tmp/x.json", "--renew-deadline", "20s", "--", "true"],
     "must be less than lease_timeout"),
    (["run", "--bogus", "--lock", "file:///tmp/x.json", "--", "true"], "unknown option"),
    (["status"], "missing lock URL"),
    (["frobnicate"], "unknown command"),
])
def test_usage_errors_exit_2_with_one_line(args, needle):
    r = cli(*args)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_status_exit_codes(tmp_path):
    lock = tmp_path / "l.json"
    r = cli("status", str(lock))
    assert r.returncode == 3 and "no lock record" in r.stdout
    lock.write_text("not json")
    r = cli("status", f"file://{lock}", "--json")
    assert r.returncode == 3 and json.loads(r.stdout)["corrupt"] is True
    r = cli("status", "file:///no/such/dir/l.json")
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_three_nodes_one_leader_then_kill9_failover(cluster):
    nodes = cluster()
    first = wait_for(lambda: leaders(nodes), 15, "a leader")
    time.sleep(2)
    running = leaders(nodes)
    assert len(running) == 1, [n.id for n in running]
    old = running[0]
    term = old.terms()[-1]
    st = json.loads(cli("status", "--json", f"file://{old.log.parent}/leader.json").stdout)
    assert st["leaderID"] == old.id and st["term"] == term and st["live"] is True

    t0 = time.monotonic()
    old.kill9()   # the node and its CMD die at once
    new = wait_for(lambda: [n for n in leaders(nodes) if n is not old], 40, "a new leader")
    took = time.monotonic() - t0
    assert len(new) == 1
    assert new[0].terms()[-1] > term, "the new leader has a higher term"
    # infrequent (30 s default, +-10 % jitter) > L here and the wall-clock rule is off
    # (the default): a stable follower sees the dead leader's last record at its next
    # read; if that read comes within renew_interval + 2 s of the crash the record still
    # looks fresh and it waits one more infrequent interval before the unchanged etag
    # lets it take over (docs/algorithm.md, "Failover after a crash"): at most about
    # 3 s + 1.1 x 30 s, plus the frequent interval and 2 s of slack.
    assert took < 3 + 33 + 0.5 + 2, f"failover took {took:.1f}s"
    assert first


def test_kill9_failover_within_lease_plus_frequent(cluster):
    extra = FAST + ["--infrequent-interval", "2s"]     # infrequent <= L
    nodes = cluster(extra=extra)
    wait_for(lambda: leaders(nodes), 15, "a leader")
    time.sleep(1.5)
    old = leaders(nodes)[0]
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.kill9()
    new = wait_for(lambda: [n for n in leaders(nodes) if n is not old], 15, "a new leader")
    took = time.monotonic() - t0
    assert new[0].terms()[-1] > term
    assert took <= 3 + 0.5 + 1 + 0.5, f"failover took {took:.2f}s, bound L + frequent + 1 s"
    print(f"kill -9 failover: {took:.2f}s")


def test_sigterm_hands_over_within_frequent(cluster):
    extra = FAST + ["--infrequent-interval", "500ms"]
    nodes = cluster(extra=extra)
    wait_for(lambda: leaders(nodes), 15, "a leader")
    time.sleep(1)
    old = leaders(nodes)[0]
    term = old.terms()[-1]
    t0 = time.monotonic()
    old.proc.send_signal(signal.SIGTERM)
    assert old.proc.wait(timeout=10) == 0, "SIGTERM makes s3lect exit 0"
    new = wait_for(lambda: [n for n in leaders(nodes) if n is not old], 10, "a new leader")
    took = time.monotonic() - t0
    assert "releasing leadership" in old.text() and "command exited" in old.text()
    assert new[0].terms()[-1] > term
    assert took <= 0.5 + 1 + 0.5, f"handover took {took:.2f}s, bound frequent + 1 s"
    print(f"SIGTERM handover: {took:.2f}s")


def test_cmd_exit_releases_and_propagates_status(tmp_path):
    r = subprocess.run([str(BIN), "run", "--lock", f"file://{tmp_path}/l.json", "--id", "solo",
                        *FAST, "--", "sh", "-c", "test \"$S3LECT_TERM\" -gt 1000000000000 && exit 7"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 7, r.stderr
    st = json.loads(cli("status", "--json", f"file://{tmp_path}/l.json").stdout)
    # A lock it created: the term is its clock in ms (docs/algorithm.md "Terms").
    assert st["released"] is True and st["term"] > 10**12


def test_command_not_found_exits_127(tmp_path):
    r = subprocess.run([str(BIN), "run", "--lock", f"file://{tmp_path}/l.json", *FAST, "--",
                        "/definitely/not/a/program"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 127 and "cannot run" in r.stderr
