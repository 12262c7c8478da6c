# SPDX-License-Identifier: Apache-2.0
"""Failed peer checks show in the CLI's log (issue 14 item 10).

`s3lect run --peer` nodes on a file lock (the failure is in peer mode, not in
the store): the leader serves its endpoint with a certificate for another
name (DNS:wrong.example, signed by the cluster CA), so a follower's every
check fails TLS name verification. The follower must print one
`s3lect: error: peer mode (tlsName): ...` line that names the leader and
what to check (not one per check), keep following through the lock, and
take over when the leader stops. The C test tests/c/test_peer_failures.c
covers every class, the counters and the rate limit.
"""
from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from harness.cli import Node
from harness.pki import issue, make_ca
from harness.wait import wait_for

# Renewals every 500 ms: a follower whose check fails reads the lock, sees
# the next renewal and checks again, about twice a second.
TIMING = ["--lease-timeout", "3s", "--renew-interval", "500ms", "--renew-deadline", "2s",
          "--frequent-interval", "250ms", "--infrequent-interval", "1s"]


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A throwaway CA, a certificate for 127.0.0.1 and one for another name only."""
    d = tmp_path_factory.mktemp("pki")
    make_ca(d, "ca", constraints=False)
    for name, san in (("good", "IP:127.0.0.1,DNS:localhost"), ("wrong", "DNS:wrong.example")):
        issue(d, name, "ca", san=san, subject=f"/CN=s3lect test {name}", eku="serverAuth")
    return {k: d / f"{k}.pem" for k in ("ca", "good", "wrong")} | {
        "good-key": d / "good.key", "wrong-key": d / "wrong.key"}


def peer_node(bin_, tmp, lock, node_id, cert, key, ca) -> Node:
    """`s3lect run --peer` with certificates, its endpoint on 127.0.0.1:peer_port."""
    return Node(bin_, tmp, lock, node_id, None, TIMING, cmd=["sleep", "600"], kill_timeout=None,
                peer=(cert, key, ca))


@pytest.fixture
def nodes():
    started: list[Node] = []
    yield started
    for n in started:
        n.stop()


def test_wrong_name_certificate_is_logged_once_and_the_follower_still_follows(
        s3lect_bin, tmp_path, pki, nodes):
    lock = f"file://{tmp_path}/leader.json"
    leader = peer_node(s3lect_bin, tmp_path, lock, "lead", pki["wrong"], pki["wrong-key"],
                       pki["ca"])
    nodes.append(leader)
    wait_for(leader.leading, 15, "the leader to acquire")
    follower = peer_node(s3lect_bin, tmp_path, lock, "follow", pki["good"], pki["good-key"],
                         pki["ca"])
    nodes.append(follower)
    wait_for(lambda: "error: peer mode" in follower.text(), 15, "the follower's error line")
    time.sleep(5)  # about ten more failed checks
    lines = [l for l in follower.text().splitlines() if "error:" in l]
    assert len(lines) == 1, f"one error line, not one per check:\n{follower.text()}"
    line = lines[0]
    assert line.startswith("s3lect: error: peer mode (tlsName): "), line
    assert f"127.0.0.1:{leader.peer_port}" in line, line
    assert "does not match its name" in line and "subjectAltName" in line, line
    assert "--peer-cert" in line, line
    assert leader.leading() and not follower.leading(), "the election is undisturbed"

    # The follower followed through the lock all along: a graceful stop hands over.
    leader.proc.send_signal(signal.SIGTERM)
    assert leader.proc.wait(timeout=10) == 0
    wait_for(follower.leading, 10, "the follower to take over")
    assert not re.search(r"error: peer mode \((?!tlsName)", follower.text()), follower.text()
