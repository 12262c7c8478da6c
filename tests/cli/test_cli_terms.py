# SPDX-License-Identifier: Apache-2.0
"""Terms at the limit of what a record holds exactly (2^53 - 1) on the file store:
no node takes such a lock over (it would repeat a term or start again at 1), the
error and `status` name the repair, and `s3lect reset-term` starts terms again on
purpose. Real processes; lease 3 s; generous bounds for a loaded machine."""
import json
import os
import subprocess
import time
from pathlib import Path

from harness.cli import Node
from harness.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("S3LECT_BUILD_DIR", ROOT / "build")) / "bin" / "s3lect"

MAX = 2**53 - 1
FAST = ["--lease-timeout", "3s", "--renew-interval", "1s", "--renew-deadline", "2s",
        "--frequent-interval", "500ms", "--infrequent-interval", "1s"]


def cli(*args, timeout=30):
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout)


def record(path, term, leader="old"):
    path.write_text('{"leaderID":"%s","lastUpdated":"2023-01-01T00:00:00Z","term":%s,'
                    '"leaseMs":3000}' % (leader, term))


def start_node(tmp, lock, name):
    """`s3lect run` whose command writes its start line (with S3LECT_TERM) to
    TMP/cmd.log, then sleeps; started_terms() are the terms it started in."""
    return Node(BIN, tmp, lock, name, None, FAST, kill_timeout="500ms")


def test_term_limit_is_refused_explained_and_reset(tmp_path):
    path = tmp_path / "leader.json"
    lock = str(path)
    # The last term that can be written: taken, exactly.
    record(path, MAX - 1)
    r = subprocess.run([str(BIN), "run", "--lock", lock, "--id", "a", *FAST, "--kill-timeout",
                        "500ms", "--", "sh", "-c",
                        'test "$S3LECT_TERM" = 9007199254740991'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    st = json.loads(cli("status", "--json", lock).stdout)
    assert st["term"] == MAX and st["released"] and st["termExhausted"], st

    # No node takes it over with 2^53 (which reads back as corrupt) or with 1.
    nodes = [start_node(tmp_path, lock, "b")]
    try:
        wait_for(lambda: "reset-term" in nodes[0].text(), timeout=20, what="error line")
        time.sleep(4)  # more than a lease: still nobody
        assert nodes[0].started_terms() == [] and json.loads(path.read_text())["term"] == MAX
        line = [ln for ln in nodes[0].text().splitlines() if "reset-term" in ln][0]
        assert "2^53 - 1" in line and line.startswith("s3lect: error:"), line
        st = cli("status", lock)
        assert st.returncode == 3 and "2^53 - 1" in st.stdout, st.stdout
        assert f"s3lect reset-term {lock}" in st.stdout, st.stdout

        # A term that can still grow is never reset.
        r = cli("reset-term", lock)
        assert r.returncode == 0, r.stderr
        assert json.loads(path.read_text())["term"] == 0
        r = cli("reset-term", lock)
        assert r.returncode == 1 and "can still grow" in r.stderr, r.stderr
        # The waiting node follows the reset: term 1, and says terms restarted.
        wait_for(lambda: nodes[0].started_terms() == [1], timeout=30,
                 what="term 1 after the reset")
        assert "went back from 9007199254740991 to 0" in nodes[0].text()
        nodes[0].stop()

        # A record an older version wrote with term 2^53: corrupt, never taken
        # over; reset-term waits out a holder's lease, then resets it.
        record(path, 2**53)
        nodes.append(start_node(tmp_path, lock, "c"))
        wait_for(lambda: "reset-term" in nodes[1].text(), timeout=20, what="error line")
        st = cli("status", "--json", lock)
        assert st.returncode == 3 and json.loads(st.stdout)["termExhausted"], st.stdout
        assert "s3lect reset-term" in cli("status", lock).stdout
        time.sleep(4)
        assert nodes[1].started_terms() == []
        t0 = time.monotonic()
        r = cli("reset-term", lock, "--lease-timeout", "2s")
        assert r.returncode == 0 and "waiting 2.0s" in r.stderr, r.stderr
        assert time.monotonic() - t0 >= 2.0
        wait_for(lambda: nodes[1].started_terms() == [1], timeout=30,
                 what="term 1 after the reset")
    finally:
        for n in nodes:
            n.stop()


def test_reset_term_refuses_while_a_leader_renews(tmp_path):
    path = tmp_path / "leader.json"
    record(path, MAX - 1)
    node = start_node(tmp_path, str(path), "a")
    try:
        wait_for(lambda: node.started_terms() == [MAX], timeout=30, what="leader at 2^53 - 1")
        r = cli("reset-term", str(path), "--lease-timeout", "3s")
        assert r.returncode == 1 and "a live leader holds the lock" in r.stderr, r.stderr
        assert json.loads(path.read_text())["term"] == MAX
        assert node.proc.poll() is None and node.started_terms() == [MAX]
    finally:
        node.stop()
