# SPDX-License-Identifier: Apache-2.0
"""Zero-config peer mode through the Python binding: ``peer_mode=True`` with
no certificate and no ``server_addr``. libs3lect makes a key and a
self-signed certificate (one per process, shared by its zero-config
electors, as is their listener), names the key in the lock record
(``peerKeySha256``) and followers pin it; the endpoint listens on the
address that routes to the store (127.0.0.1 for a file lock) on a free port.

A file:// lock: no S3 needed.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import s3lect
from pyutil import wait_until

# infrequent_interval is 30 s on purpose: a follower that notices the
# leader's release within a second can only have heard it through the
# leader's endpoint (the long poll), not by reading the lock file.
ZERO_CONFIG: Dict[str, Any] = dict(
    lease_timeout=3,
    renew_interval=1,
    renew_deadline=2,
    frequent_interval=1,
    infrequent_interval=30,
    request_timeout=5,
    peer_mode=True,
)

PEM_CERT = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
PEM_KEY = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"


def read_record(path: Path) -> Dict[str, Any]:
    return dict(json.loads(path.read_text()))


def only_leader(els: List[s3lect.Elector]) -> Any:
    leaders = [el for el in els if el.is_leader]
    assert len(leaders) <= 1, f"two leaders: {[el.server_id for el in leaders]}"
    return leaders[0] if leaders else None


def test_zero_config_pair_hands_over_through_the_pinned_endpoint(electors, tmp_path):
    path = tmp_path / "zero-config.json"
    els = [electors(f"file://{path}", server_id=f"zc-{n}", **ZERO_CONFIG) for n in "ab"]
    for el in els:
        cfg = el.get_config()
        assert cfg["peer_mode"] is True and not cfg.get("server_addr"), cfg
        el.start()

    # (a) one leader.
    leader = wait_until(lambda: only_leader(els), 10, "one of the two electors to lead")
    elected = time.monotonic()
    follower = els[1] if leader is els[0] else els[0]

    # (b) its record names its key and its endpoint, which takes connections.
    record = wait_until(lambda: path.exists() and read_record(path), 5, "the lock file")
    assert record["leaderID"] == leader.server_id, record
    pin = record.get("peerKeySha256", "")
    assert len(pin) == 44 and len(base64.b64decode(pin, validate=True)) == 32, record
    m = re.fullmatch(r"127\.0\.0\.1:(\d+)", record.get("leaderAddr", ""))
    assert m, f"leaderAddr of a file lock should be 127.0.0.1:<port>: {record}"
    port = int(m.group(1))
    assert port == leader.peer_port, (record, leader.peer_port)
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass

    # (d) the follower settles on the leader's endpoint without a failure.
    wait_until(lambda: follower.status().state == s3lect.State.FOLLOWER_STABLE, 10,
               "the follower to become stable")
    time.sleep(max(0.0, elected + 3 - time.monotonic()))
    assert only_leader(els) is leader
    status = json.loads(follower.status_json())
    assert set(status["peerFailures"].values()) == {0}, status
    assert "tlsPin" in status["peerFailures"], status
    assert status["peerLastFailure"] == "", status

    # (c) a graceful stop of the leader: the follower leads at once.
    begin = time.monotonic()
    leader.stop()
    wait_until(lambda: follower.is_leader, 10, "the follower to take over")
    took = time.monotonic() - begin
    assert took <= 1.5, (f"the takeover took {took:.2f} s: with infrequent_interval 30 s only "
                         "the peer long poll notices the release this fast")
    after = wait_until(lambda: (r := read_record(path))["leaderID"] == follower.server_id and r,
                       5, "the new leader's record")
    # Both electors are in this process: one key, one listener (docs/peer.md
    # "One listener per process"); another process would publish another key.
    assert after.get("peerKeySha256") == pin, after
    assert after["leaderAddr"] == f"127.0.0.1:{follower.peer_port}" == f"127.0.0.1:{port}", after


def test_zero_config_settings_are_checked(tmp_path):
    lock = f"file://{tmp_path}/checked.json"
    # peer_mode alone is a valid configuration.
    s3lect.Elector(lock, server_id="alone", peer_mode=True)
    for half in (dict(peer_cert=PEM_CERT), dict(peer_key=PEM_KEY)):
        with pytest.raises(s3lect.ConfigError, match="both peer_cert and peer_key"):
            s3lect.Elector(lock, server_id="half", peer_mode=True, peer_ca=PEM_CERT, **half)
    with pytest.raises(s3lect.ConfigError, match="does not verify clients"):
        s3lect.Elector(lock, server_id="mtls", peer_mode=True,
                       peer_client_cert=PEM_CERT + PEM_KEY)
