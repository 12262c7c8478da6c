# SPDX-License-Identifier: Apache-2.0
"""Peer mode through the Python binding: Elector.peer_response() (the
leadership endpoint answered in-process), the built-in HTTPS endpoint
(peer_port), enable_peer_mode(), and a peer-mode election on MinIO.

Certificates are made at test time with the openssl CLI (a throwaway CA).
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List

import pytest

import s3lect
from harness.countproxy import CountingProxy
from pyutil import wait_until
from harness.pki import issue, make_ca
from harness.servers import free_port

PATH = "/health/leadership"


# ---------------------------------------------------------------------------
# Helpers and fixtures
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """A throwaway CA; a certificate for 127.0.0.1 usable as server and client
    certificate; the same as one PEM with its key (for peer_client_cert); and
    an unrelated CA."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        make_ca(d, ca, subject=f"/CN=s3lect python test {ca}", key_usage="keyCertSign,cRLSign")
    # One certificate for every node here, so it names every server id that
    # followers check in CA mode (docs/peer.md "Whose answer counts").
    issue(d, "node", "ca", san="IP:127.0.0.1,DNS:localhost,DNS:peer-0,DNS:peer-1,DNS:peer-2",
          subject="/CN=127.0.0.1")
    (d / "client.pem").write_bytes((d / "node.pem").read_bytes() + (d / "node.key").read_bytes())
    return {"ca": d / "ca.pem", "other-ca": d / "other-ca.pem", "cert": d / "node.pem",
            "key": d / "node.key", "client": d / "client.pem"}


def https_get(port: int, ca: Path, path: str = PATH, client: Path | None = None,
              method: str = "GET") -> tuple[int, Dict[str, str], str]:
    """One request to https://127.0.0.1:port, verifying the server against ca."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if client is not None:
        ctx.load_cert_chain(str(client))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        conn.close()


def file_lock(tmp_path: Path, name: str = "peer-lock") -> str:
    return f"file://{tmp_path}/{name}.json"


def leading(el: s3lect.Elector) -> Dict[str, Any]:
    """el's 200 answer, parsed; fails the test on any other status."""
    status, body = el.peer_response()
    assert status == 200, f"peer_response() of the leader gave {status}: {body}"
    return dict(json.loads(body))


# ---------------------------------------------------------------------------
# peer_response() with a file lock (no TLS, no S3)
# ---------------------------------------------------------------------------


def test_peer_response_follows_leadership(electors, tmp_path):
    el = electors(file_lock(tmp_path), server_id="solo", server_addr="127.0.0.1:7443")
    status, body = el.peer_response()
    assert status == 404, f"an elector that never started must not claim leadership: {body}"
    assert "error" in json.loads(body)

    el.start()
    assert el.wait_for_leadership(timeout=10), "a lone elector on a file lock did not lead"
    rec = leading(el)
    assert rec["leaderID"] == "solo"
    assert rec["leaderAddr"] == "127.0.0.1:7443"
    assert rec["term"] == el.term >= 1
    assert isinstance(rec["etag"], str) and rec["etag"], f"no etag in {rec}"

    status, body = el.peer_response(PATH, "HEAD")
    assert status == 200, f"HEAD must answer like GET: {status} {body}"
    status, body = el.peer_response(PATH, "POST")
    assert status == 405, f"POST gave {status}: {body}"
    assert "method not allowed" in json.loads(body)["error"]
    status, body = el.peer_response("/somewhere/else")
    assert status == 404, f"another path gave {status}: {body}"
    status, body = el.peer_response(PATH + "?wait=soon")
    assert status == 400, f"a wait that is not a number gave {status}: {body}"

    el.stop()
    status, body = el.peer_response()
    assert status == 404, f"a stopped elector must not claim leadership: {status} {body}"


def test_peer_response_is_404_on_a_follower(electors, tmp_path):
    lock = file_lock(tmp_path)
    a = electors(lock, server_id="a").start()
    assert a.wait_for_leadership(timeout=10)
    b = electors(lock, server_id="b").start()
    wait_until(lambda: b.leader_id == "a", 10, "b to see a as leader")
    status, body = b.peer_response()
    assert status == 404, f"the follower answered {status}: {body}"
    assert "not the leader" in json.loads(body)["error"]
    assert leading(a)["leaderID"] == "a"


def test_default_target_is_the_configured_health_path(electors, tmp_path):
    el = electors(file_lock(tmp_path), server_id="p", peer_health_path="/ha/leader").start()
    assert el.wait_for_leadership(timeout=10)
    assert leading(el)["leaderID"] == "p"
    assert el.peer_response("/ha/leader")[0] == 200
    assert el.peer_response(PATH)[0] == 404, "the default path is not served once changed"


def test_long_poll_releases_the_gil_and_ends_on_renewal(electors, tmp_path):
    # A long lease and a slow renewal: a long poll with the current etag
    # then ends by its `wait`, and another thread must run meanwhile.
    el = electors(file_lock(tmp_path), server_id="lp", lease_timeout=30, renew_deadline=20,
                  renew_interval=10).start()
    assert el.wait_for_leadership(timeout=10)
    etag = leading(el)["etag"]
    target = f"{PATH}?wait=400&etag={urllib.parse.quote(etag, safe='')}"

    ticks: List[float] = []
    done = threading.Event()

    def ticker() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        t0 = time.monotonic()
        status, body = el.peer_response(target)
        t1 = time.monotonic()
    finally:
        done.set()
        t.join()
    assert status == 200, body
    if json.loads(body)["etag"] == etag:  # not ended early by a renewal (10 s apart)
        assert t1 - t0 >= 0.3, f"a long poll with wait=400 returned after {t1 - t0:.3f} s"
    during = [x for x in ticks if t0 + 0.05 < x < t1 - 0.05]
    assert during, "no other Python thread ran during the long poll: the GIL was held"


def test_long_poll_sees_the_next_renewal_and_the_stop(electors, tmp_path):
    el = electors(file_lock(tmp_path), server_id="lp2").start()  # renews every 0.5 s
    assert el.wait_for_leadership(timeout=10)
    etag = leading(el)["etag"]
    q = urllib.parse.quote(etag, safe="")
    t0 = time.monotonic()
    status, body = el.peer_response(f"{PATH}?wait=20000&etag={q}")
    took = time.monotonic() - t0
    assert status == 200, body
    assert json.loads(body)["etag"] != etag, "the long poll ended without a new etag"
    assert took < 10, f"the long poll took {took:.1f} s; renewals are 0.5 s apart"

    # A long poll pending while the elector stops ends with 404.
    etag = leading(el)["etag"]
    q = urllib.parse.quote(etag, safe="")
    got: List[Any] = []
    polling = threading.Thread(
        target=lambda: got.append(el.peer_response(f"{PATH}?wait=30000&etag={q}")))
    polling.start()
    el.stop()
    polling.join(timeout=15)
    assert not polling.is_alive(), "the long poll did not end when the elector stopped"
    assert got and got[0][0] in (200, 404), f"long poll during stop: {got}"
    assert el.peer_response()[0] == 404


def test_peer_response_from_a_callback_raises_busy(electors, tmp_path):
    seen: List[BaseException] = []
    done = threading.Event()

    def on_event(ev: s3lect.Event) -> None:
        if ev.type is s3lect.EventType.ACQUIRED and not done.is_set():
            try:
                el.peer_response()
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                seen.append(exc)
            done.set()

    el = electors(file_lock(tmp_path), server_id="cb", on_event=on_event)
    el.start()
    assert done.wait(10), "no acquired event"
    assert len(seen) == 1 and isinstance(seen[0], s3lect.BusyError), f"got {seen}"


# ---------------------------------------------------------------------------
# The built-in HTTPS endpoint
# ---------------------------------------------------------------------------


def test_https_endpoint_serves_the_leadership(electors, tmp_path, pki):
    el = electors(file_lock(tmp_path), server_id="tls",
                  server_addr=f"127.0.0.1:{free_port()}", peer_listen="127.0.0.1:0",
                  peer_mode=True,
                  peer_cert=pki["cert"].read_bytes(),  # PEM bytes
                  peer_key=str(pki["key"]),            # a path
                  peer_ca=pki["ca"].read_text())       # PEM text
    assert el.peer_port == 0, "nothing may listen before start()"
    el.start()
    port = wait_until(lambda: el.peer_port, 10, "the peer endpoint to listen")
    assert el.wait_for_leadership(timeout=10)

    status, headers, body = https_get(port, pki["ca"])
    assert status == 200, body
    assert headers["content-type"].startswith("application/json")
    rec = json.loads(body)
    assert rec["leaderID"] == "tls" and rec["term"] == el.term and rec["etag"]

    status, headers, _ = https_get(port, pki["ca"], method="PUT")
    assert status == 405 and "GET" in headers.get("allow", "") and "POST" in headers["allow"]
    # POST is the batched long poll (docs/peer.md): a request that is not one is a 400.
    status, headers, _ = https_get(port, pki["ca"], method="POST")
    assert status == 400

    # The same server refuses a client that does not trust its CA.
    with pytest.raises(ssl.SSLCertVerificationError):
        https_get(port, pki["other-ca"])

    el.stop()
    assert el.peer_port == 0, "the endpoint must close when the elector stops"
    with pytest.raises(OSError):
        https_get(port, pki["ca"])


def test_https_endpoint_with_mutual_tls(electors, tmp_path, pki):
    el = electors(file_lock(tmp_path), server_id="mtls", peer_mode=True,
                  server_addr=f"127.0.0.1:{free_port()}", peer_listen="127.0.0.1:0",
                  peer_cert=pki["cert"], peer_key=pki["key"], peer_ca=pki["ca"],
                  peer_client_cert=pki["client"]).start()
    port = wait_until(lambda: el.peer_port, 10, "the peer endpoint to listen")
    assert el.wait_for_leadership(timeout=10)
    status, _, body = https_get(port, pki["ca"], client=pki["client"])
    assert status == 200 and json.loads(body)["leaderID"] == "mtls"
    # Without a client certificate the handshake (or the first read) fails.
    with pytest.raises((ssl.SSLError, ConnectionError)):
        https_get(port, pki["ca"])


def test_peer_mode_needs_its_settings(tmp_path, pki):
    # server_addr is optional and no certificate is zero-config
    # (test_peer_zero_config.py); a certificate needs its key and a CA.
    s3lect.Elector(file_lock(tmp_path), peer_mode=True, peer_ca=pki["ca"],
                   peer_cert=pki["cert"], peer_key=pki["key"])
    with pytest.raises(s3lect.ConfigError, match="both peer_cert and peer_key"):
        s3lect.Elector(file_lock(tmp_path), peer_mode=True, server_addr="127.0.0.1:1",
                       peer_ca=pki["ca"], peer_cert=pki["cert"])
    with pytest.raises(s3lect.ConfigError, match="peer_ca"):
        s3lect.Elector(file_lock(tmp_path), peer_mode=True, server_addr="127.0.0.1:1",
                       peer_cert=pki["cert"], peer_key=pki["key"])


def test_enable_peer_mode_starts_the_endpoint(electors, tmp_path, pki):
    el = electors(file_lock(tmp_path), server_id="late",
                  server_addr=f"127.0.0.1:{free_port()}", peer_listen="127.0.0.1:0",
                  peer_cert=pki["cert"], peer_key=pki["key"]).start()
    assert el.wait_for_leadership(timeout=10)
    assert el.peer_port == 0, "no endpoint without peer mode"
    with pytest.raises(s3lect.ConfigError, match="cannot read"):
        el.enable_peer_mode(tmp_path / "missing-ca.pem")
    with pytest.raises(s3lect.ConfigError, match="empty"):
        el.enable_peer_mode(b"")
    el.enable_peer_mode(pki["ca"])  # a path
    port = wait_until(lambda: el.peer_port, 10, "the endpoint after enable_peer_mode()")
    status, _, body = https_get(port, pki["ca"])
    assert status == 200 and json.loads(body)["leaderID"] == "late"


def test_enable_peer_mode_before_start(electors, tmp_path, pki):
    # Before start the settings are checked as peer_mode=True would check them.
    half = electors(file_lock(tmp_path, "half"), server_id="half", server_addr="127.0.0.1:9",
                    peer_cert=pki["cert"])
    with pytest.raises(s3lect.ConfigError, match="both peer_cert and peer_key"):
        half.enable_peer_mode(pki["ca"].read_bytes())
    assert half.get_config()["peer_mode"] is False
    # No certificate: zero-config, the endpoint serves a key made at start.
    bare = electors(file_lock(tmp_path, "bare"), server_id="bare", server_addr="127.0.0.1:9",
                    peer_listen="127.0.0.1:0")
    bare.enable_peer_mode(pki["ca"].read_bytes())
    bare.start()
    wait_until(lambda: bare.peer_port, 10, "start() to start the zero-config endpoint")
    assert bare.wait_for_leadership(timeout=10)
    assert len(leading(bare).get("peerKeySha256", "")) == 44
    with pytest.raises(s3lect.ConfigError, match="server_addr"):
        electors(file_lock(tmp_path, "noaddr"), server_id="noaddr").start().enable_peer_mode(
            pki["ca"])

    el = electors(file_lock(tmp_path), server_id="early", server_addr="127.0.0.1:9",
                  peer_listen="127.0.0.1:0", peer_cert=pki["cert"], peer_key=pki["key"])
    el.enable_peer_mode(pki["ca"].read_text())  # PEM text
    assert el.peer_port == 0
    el.start()
    port = wait_until(lambda: el.peer_port, 10, "start() to start the endpoint")
    assert el.wait_for_leadership(timeout=10)
    status, _, body = https_get(port, pki["ca"])
    assert status == 200 and json.loads(body)["leaderID"] == "early"


# ---------------------------------------------------------------------------
# Peer mode on MinIO
# ---------------------------------------------------------------------------


def test_peer_mode_election_on_minio(electors, s3_lock, s3_settings, minio, pki):
    port = int(minio.endpoint.rsplit(":", 1)[1])
    proxies = [CountingProxy("127.0.0.1", port) for _ in range(3)]
    els: List[s3lect.Elector] = []
    try:
        s3 = dict(s3_settings)
        for i, proxy in enumerate(proxies):
            s3["endpoint"] = proxy.endpoint  # counts this node's S3 requests
            els.append(electors(s3_lock, server_id=f"peer-{i}", peer_mode=True,
                                server_addr=f"127.0.0.1:{free_port()}",
                                peer_cert=pki["cert"], peer_key=pki["key"],
                                peer_ca=pki["ca"], **s3))
        for el in els:
            el.start()
        for el in els:
            listen = int(el.get_config()["server_addr"].rsplit(":", 1)[1])
            wait_until(lambda: el.peer_port == listen, 10,
                       f"{el.server_id} to listen on its server_addr port {listen}")

        def leaders(group: List[s3lect.Elector]) -> List[s3lect.Elector]:
            return [e for e in group if e.is_leader]

        first = wait_until(lambda: leaders(els), 20, "one of three peer-mode electors to lead")
        assert len(first) == 1, f"two leaders: {[e.server_id for e in first]}"
        leader = first[0]
        followers = [e for e in els if e is not leader]
        wait_until(lambda: all(e.status().state is s3lect.State.FOLLOWER_STABLE
                               for e in followers), 20, "both followers to become stable")
        assert leaders(els) == [leader]
        status, _, body = https_get(leader.peer_port, pki["ca"])
        assert status == 200 and json.loads(body)["leaderID"] == leader.server_id
        for f in followers:
            assert f.leader_id == leader.server_id
            status, _, _ = https_get(f.peer_port, pki["ca"])
            assert status == 404, f"follower {f.server_id} claims leadership over HTTPS"

        # Stable followers ask the leader, not S3: without peer mode each would
        # read the lock about once per infrequent_interval (1 s) here.
        before = [p.snapshot() for p in proxies]
        window = 4.0
        time.sleep(window)
        after = [p.snapshot() for p in proxies]
        assert leaders(els) == [leader], "leadership moved while nothing disturbed it"
        for el, b, a in zip(els, before, after):
            if el is not leader:
                gets = (a - b)["GET"]
                assert gets <= 1, (f"follower {el.server_id} read S3 {gets} times in {window} s; "
                                   "in peer mode it should long-poll the leader")

        old_term = leader.term
        t0 = time.monotonic()
        leader.stop()
        assert leader.peer_port == 0
        new = wait_until(lambda: leaders(followers), 10, "a follower to take over")
        took = time.monotonic() - t0
        assert len(new) == 1, f"two leaders after the handover: {[e.server_id for e in new]}"
        assert new[0].term > old_term
        # The long poll's 404 sends the followers to S3 at once: well under the lease.
        assert took < 3.0, f"handover took {took:.2f} s"
        status, _, body = https_get(new[0].peer_port, pki["ca"])
        assert status == 200 and json.loads(body)["leaderID"] == new[0].server_id
        other = [e for e in followers if e is not new[0]][0]
        wait_until(lambda: other.leader_id == new[0].server_id, 10,
                   "the remaining follower to follow the new leader")
    finally:
        for el in els:  # before the proxies close, so that the releases reach MinIO
            el.stop()
        for p in proxies:
            p.close()
