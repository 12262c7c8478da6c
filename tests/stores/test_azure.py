# SPDX-License-Identifier: Apache-2.0
"""The Azure Blob store on Azurite (tests/harness/azurite.py), beyond the
store suite's shared tests (test_stores_cli.py runs election, kill -9,
handover, stale writes, restart, pause, check-store and peer mode on it):
the 409 BlobAlreadyExists of a lost create race, throttling, each explicit
credential source (connection string, account key, SAS) end to end, bad
URLs and credentials with one clear line each, check-store against a
server that ignores the conditions, and no throwaway secret in any output.
"""

from __future__ import annotations

import base64
import http.server
import itertools
import json
import re
import secrets
import threading
import time

import pytest

from harness.cli import CHECK_STORE_PASSED, check_store_verdict, only_leader, probe, run, wait_for
from storeutil import _base as base_env

# Suite stores runs this file in its second pytest session (scripts/test).
pytestmark = pytest.mark.second_session

LEASE_S = 3.0
FAILOVER_BOUND_S = LEASE_S + 1.0 + 8.0


def _lock(az, name: str) -> str:
    return f"{az.lock_prefix()}{name}-{secrets.token_hex(4)}.json"


def _secrets(az, *more: str) -> list[str]:
    return [az.account_key, *[m for m in more if m]]


def _assert_no_secret(text: str, secret_list: list[str]) -> None:
    for s in secret_list:
        assert s not in text, "a throwaway secret appears in the output"


def _key_env(az, key: str | None = None) -> dict[str, str]:
    """The account key alone (AZURE_STORAGE_KEY); the endpoint goes on the command line."""
    return dict(base_env(), AZURE_STORAGE_KEY=key or az.account_key,
                AZURE_STORAGE_ACCOUNT=az.account)


def _conn_env(az) -> dict[str, str]:
    return dict(base_env(), **az.env())


def test_lost_create_race_is_a_precondition_not_transient(azurite, s3_probe_bin):
    """Azurite answers a second If-None-Match: * with 409 BlobAlreadyExists:
    the create lost, so PRECONDITION (a transient answer would make the
    loser retry as if the write might have landed)."""
    env = _conn_env(azurite)
    lock = _lock(azurite, "race")
    a = probe(s3_probe_bin, env, "put", lock, "--body", '{"v":1}')
    assert a["outcome"] == "OK", a
    b = probe(s3_probe_bin, env, "put", lock, "--body", '{"v":2}')
    assert b["outcome"] == "PRECONDITION", b
    assert b["http_status"] == 409 and "BlobAlreadyExists" in b["message"], b
    assert "another writer won" in b["message"], b
    stale = probe(s3_probe_bin, env, "put", lock, "--body", "{}", "--if-match", '"0x1"')
    assert stale["outcome"] == "PRECONDITION" and stale["http_status"] == 412, stale
    got = probe(s3_probe_bin, env, "get", lock)
    assert got["outcome"] == "OK" and got["body"] == '{"v":1}' and got["etag"] == a["etag"], got


def test_racing_writers_check_store(azurite, s3lect_bin):
    r = run([str(s3lect_bin), "check-store", _lock(azurite, "racers"), "--racers", "8",
             "--rounds", "5"], _conn_env(azurite), timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "exactly one wins each round" in r.stdout
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    _assert_no_secret(r.stdout + r.stderr, _secrets(azurite))


@pytest.mark.parametrize("status", [b"503 Server Busy", b"429 Too Many Requests"])
def test_throttling_is_ridden_out(azurite, cluster, status):
    from throttle_proxy import AZURE_THROTTLE, ThrottleProxy, ride_out
    proxy = ThrottleProxy(azurite.port, AZURE_THROTTLE, status=status,
                          headers=b"x-ms-error-code: ServerBusy\r\n")
    try:
        from harness.cli import FAST
        extra = [*FAST, "--endpoint", f"{proxy.endpoint}/{azurite.account}"]
        nodes = cluster(_lock(azurite, "throttle"), _key_env(azurite), n=2, extra=extra)
        ride_out(proxy, nodes, LEASE_S, ["ServerBusy"])
        _assert_no_secret("".join(n.text() for n in nodes), _secrets(azurite))
    finally:
        proxy.close()


def test_account_key_and_endpoint(azurite, cluster):
    """AZURE_STORAGE_KEY with --endpoint (Shared Key), election of two."""
    from harness.cli import FAST
    extra = [*FAST, "--endpoint", azurite.blob_endpoint]
    nodes = cluster(_lock(azurite, "key"), _key_env(azurite), n=2, extra=extra)
    wait_for(lambda: only_leader(nodes), 30, "a leader")
    _assert_no_secret("".join(n.text() for n in nodes), _secrets(azurite))


def test_endpoint_without_account_path_is_path_style(azurite, s3lect_bin):
    """--endpoint http://127.0.0.1:PORT (no path): the account goes in the path."""
    lock = _lock(azurite, "nopath")
    r = run([str(s3lect_bin), "check-store", lock, "--racers", "2", "--rounds", "1",
             "--endpoint", f"http://127.0.0.1:{azurite.port}"], _key_env(azurite), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_sas_token_end_to_end(azurite, cluster, s3lect_bin):
    sas = azurite.client().container_sas(azurite.container, "rcw")
    sig = [kv.split("=", 1)[1] for kv in sas.split("&") if kv.startswith("sig=")][0]
    env = dict(base_env(), AZURE_STORAGE_SAS_TOKEN="?" + sas)
    from harness.cli import FAST
    extra = [*FAST, "--endpoint", azurite.blob_endpoint]
    nodes = cluster(_lock(azurite, "sas"), env, n=2, extra=extra)
    wait_for(lambda: only_leader(nodes), 30, "a leader")
    r = run([str(s3lect_bin), "check-store", _lock(azurite, "sas-check"), "--endpoint",
             azurite.blob_endpoint], env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = "".join(n.text() for n in nodes) + r.stdout + r.stderr
    _assert_no_secret(out, _secrets(azurite, sig, sas))


def _one_line(r, want: list[str], code: int = 1) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1, (r.returncode, r.stderr)
    for w in want:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def test_bad_credentials_are_one_clear_line(azurite, s3lect_bin, s3_probe_bin):
    ep = ["--endpoint", azurite.blob_endpoint]
    lock = _lock(azurite, "bad")
    wrong = base64.b64encode(secrets.token_bytes(64)).decode()
    r = run([str(s3lect_bin), "status", lock, *ep], _key_env(azurite, wrong))
    line = _one_line(r, ["Shared Key signature", "AZURE_STORAGE_KEY", "devstoreaccount1"])
    _assert_no_secret(r.stdout + r.stderr, _secrets(azurite, wrong))
    assert "SharedKey" not in line

    # A SAS that may only read: writes are refused with the permissions to grant.
    sas = azurite.client().container_sas(azurite.container, "r")
    env = dict(base_env(), AZURE_STORAGE_SAS_TOKEN=sas)
    p = probe(s3_probe_bin, env, "put", lock, "--body", "{}", "--endpoint", azurite.blob_endpoint)
    assert p["outcome"] == "AUTH" and "r, c and w permissions" in p["message"], p
    r = run([str(s3lect_bin), "check-store", lock, *ep], env, timeout=60)
    assert r.returncode != 0
    assert "AZURE_STORAGE_SAS_TOKEN" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "r, c and w permissions" in r.stdout + r.stderr, r.stdout + r.stderr
    sig = [kv.split("=", 1)[1] for kv in sas.split("&") if kv.startswith("sig=")][0]
    _assert_no_secret(r.stdout + r.stderr + p["message"], _secrets(azurite, sig))

    # An expired SAS: refused as a SAS problem.
    old = azurite.client().container_sas(azurite.container, "rcw", hours=-1)
    r = run([str(s3lect_bin), "status", lock, *ep], dict(base_env(), AZURE_STORAGE_SAS_TOKEN=old))
    _one_line(r, ["SAS token from AZURE_STORAGE_SAS_TOKEN was refused"])

    # None at all.
    r = run([str(s3lect_bin), "status", lock, *ep], base_env())
    _one_line(r, ["no Azure credentials", "AZURE_STORAGE_KEY"])

    # A key for another account.
    r = run([str(s3lect_bin), "status", lock, *ep],
            dict(_key_env(azurite), AZURE_STORAGE_ACCOUNT="someoneelse"))
    _one_line(r, ["'someoneelse'", "'devstoreaccount1'"], code=2)
    _assert_no_secret(r.stdout + r.stderr, _secrets(azurite))


def test_missing_container_says_create_it(azurite, s3lect_bin):
    r = run([str(s3lect_bin), "status", "az://devstoreaccount1/no-such-container/k"],
            _conn_env(azurite))
    _one_line(r, ["container 'no-such-container' does not exist", "az storage container create"])
    r = run([str(s3lect_bin), "init-store", _lock(azurite, "init")], _conn_env(azurite))
    assert r.returncode != 0 and "a container" in r.stderr, r.stderr


@pytest.mark.parametrize("url,want", [
    ("az://devstoreaccount1/c", "needs a container and a blob"),
    ("az://Dev/locks/k", "not a storage account name"),
    ("az://devstoreaccount1/a_b/k", "not a container name"),
    ("az://devstoreaccount1/locks/k?sig=s3cr3t", "query or fragment"),
    ("https://example.com/c/k", "an https lock URL names an Azure blob"),
    ("az:/devstoreaccount1/locks/k", "two slashes"),
])
def test_bad_urls_are_one_clear_line(s3lect_bin, clean_env, url, want):
    for cmd in (["status", url], ["run", "--lock", url, "--", "true"]):
        r = run([str(s3lect_bin), *cmd], clean_env)
        assert r.returncode == 2, (cmd, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], (cmd, r.stderr)
        assert "s3cr3t" not in r.stderr


class _CarelessBlobServer(http.server.ThreadingHTTPServer):
    """Answers Get Blob and Put Blob like Azure but ignores If-Match and
    If-None-Match: what check-store must catch."""

    daemon_threads = True

    def __init__(self):
        self.blobs: dict[str, tuple[bytes, str]] = {}
        self.counter = itertools.count(1)
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _CarelessHandler)


class _CarelessHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _answer(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with self.server.lock:
            got = self.server.blobs.get(self.path)
        if not got:
            self._answer(404, b"<Error><Code>BlobNotFound</Code></Error>",
                         {"x-ms-error-code": "BlobNotFound"})
        else:
            self._answer(200, got[0], {"ETag": got[1]})

    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            etag = f'"0x{next(self.server.counter):X}"'
            self.server.blobs[self.path] = (body, etag)
        self._answer(201, b"", {"ETag": etag})


def test_check_store_fails_on_a_non_conditional_server(s3lect_bin):
    srv = _CarelessBlobServer()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        key = base64.b64encode(secrets.token_bytes(64)).decode()
        env = dict(base_env(), AZURE_STORAGE_KEY=key)
        r = run([str(s3lect_bin), "check-store", "az://acct1/locks/check.json", "--endpoint",
                 f"http://127.0.0.1:{srv.server_address[1]}/acct1", "--racers", "4",
                 "--rounds", "2"], env, timeout=120)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "FAIL" in r.stdout, r.stdout + r.stderr
        assert re.fullmatch(r"\d of 7 checks FAILED: .*do not use it for s3lect",
                            check_store_verdict(r.stdout)), r.stdout
        _assert_no_secret(r.stdout + r.stderr, [key])
    finally:
        srv.shutdown()
        srv.server_close()


# ---- Entra ID (Azure AD) tokens, on Azurite over HTTPS with --oauth basic ----

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT = "11111111-2222-3333-4444-" + "5" * 12


@pytest.fixture(scope="module")
def azurite_tls():
    from harness.azurite import AzuriteServer
    from harness.servers import serve
    yield from serve(lambda: AzuriteServer(https=True))


@pytest.fixture
def entra():
    from harness.azure_fakes import EntraFake
    fake = EntraFake(TENANT, CLIENT)
    yield fake
    fake.close()


def _tls_args(az) -> list[str]:
    return ["--endpoint", az.blob_endpoint, "--ca-file", az.ca_file]


def _entra_secrets(az, fake) -> list[str]:
    return [az.account_key, fake.secret, fake.federated_token, fake.identity_header,
            *fake.issued]


def _entra_env(fake, kind: str, tmp_path) -> dict[str, str]:
    env = dict(base_env(), AZURE_AUTHORITY_HOST=fake.url)
    if kind == "client_secret":
        env.update(AZURE_TENANT_ID=TENANT, AZURE_CLIENT_ID=CLIENT, AZURE_CLIENT_SECRET=fake.secret)
    elif kind == "federated":
        f = tmp_path / "azure-identity-token"
        f.write_text(fake.federated_token + "\n")
        env.update(AZURE_TENANT_ID=TENANT, AZURE_CLIENT_ID=CLIENT,
                   AZURE_FEDERATED_TOKEN_FILE=str(f))
    elif kind == "certificate":
        pem = fake.use_certificate(tmp_path)
        env.update(AZURE_TENANT_ID=TENANT, AZURE_CLIENT_ID=CLIENT,
                   AZURE_CLIENT_CERTIFICATE_PATH=str(pem))
    elif kind == "imds":
        env.update(AZURE_POD_IDENTITY_AUTHORITY_HOST=fake.url)
    elif kind == "appservice":
        env.update(IDENTITY_ENDPOINT=f"{fake.url}/msi/token",
                   IDENTITY_HEADER=fake.identity_header)
    return env


@pytest.mark.parametrize("kind", ["client_secret", "federated", "certificate", "imds",
                                  "appservice"])
def test_entra_token_sources_elect(azurite_tls, entra, cluster, s3lect_bin, tmp_path, kind):
    """Each Entra ID source gets a token from its fake issuer (which checks
    the secret, the federated token, the certificate assertion's signature,
    the metadata headers) and the nodes elect on Azurite with it."""
    from harness.cli import FAST
    env = _entra_env(entra, kind, tmp_path)
    nodes = cluster(_lock(azurite_tls, f"entra-{kind}"), env, n=2,
                    extra=[*FAST, *_tls_args(azurite_tls)])
    wait_for(lambda: only_leader(nodes), 30, "a leader")
    assert kind in entra.requests and not entra.refused, (entra.requests, entra.refused)
    r = run([str(s3lect_bin), "whoami", _lock(azurite_tls, "w"), "--json",
             *_tls_args(azurite_tls)], env, timeout=60)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["usable"] and info["expires"], info
    assert CLIENT in info["principal"] and entra.oid in info["principal"], info
    want = {"client_secret": "AZURE_CLIENT_SECRET", "federated": "AZURE_FEDERATED_TOKEN_FILE",
            "certificate": "AZURE_CLIENT_CERTIFICATE_PATH", "imds": "IMDS",
            "appservice": "App Service"}[kind]
    assert want in info["source"], info
    out = "".join(n.text() for n in nodes) + r.stdout + r.stderr
    _assert_no_secret(out, _entra_secrets(azurite_tls, entra))


def test_entra_refused_secret_is_one_line(azurite_tls, entra, s3lect_bin, tmp_path):
    env = _entra_env(entra, "client_secret", tmp_path)
    env["AZURE_CLIENT_SECRET"] = "wrong-" + secrets.token_hex(8)
    r = run([str(s3lect_bin), "status", _lock(azurite_tls, "e"), *_tls_args(azurite_tls)], env,
            timeout=60)
    line = _one_line(r, ["Microsoft Entra ID", "HTTP 401", "AADSTS7000215"])
    assert env["AZURE_CLIENT_SECRET"] not in line
    _assert_no_secret(r.stdout + r.stderr, _entra_secrets(azurite_tls, entra))


def test_explicit_key_wins_over_entra_and_whoami_says_so(azurite, entra, s3lect_bin, tmp_path):
    env = dict(_entra_env(entra, "client_secret", tmp_path), **_key_env(azurite))
    r = run([str(s3lect_bin), "whoami", _lock(azurite, "w"), "--json", "--endpoint",
             azurite.blob_endpoint], env, timeout=60)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["source"].startswith("AZURE_STORAGE_KEY") and "devstoreaccount1" in \
        info["principal"], info
    assert not entra.requests
    _assert_no_secret(r.stdout + r.stderr, _entra_secrets(azurite, entra))


def test_entra_token_refreshed_in_background_and_file_reread(azurite_tls, cluster, tmp_path):
    """Tokens of 9 s: the cache refreshes them ahead of expiry while the
    leader keeps its term; the federated token file is re-read at each
    refresh (AKS rotates it), so a rotated token is what gets sent."""
    from harness.azure_fakes import EntraFake
    from harness.cli import FAST
    fake = EntraFake(TENANT, CLIENT, lifetime=9)
    try:
        env = _entra_env(fake, "federated", tmp_path)
        nodes = cluster(_lock(azurite_tls, "refresh"), env, n=1,
                        extra=[*FAST, *_tls_args(azurite_tls)])
        leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
        term = leader.terms()[-1]
        old = fake.federated_token
        fake.federated_token = "s3lect-fed-rotated-" + secrets.token_hex(8)
        (tmp_path / "azure-identity-token").write_text(fake.federated_token)
        time.sleep(14)
        assert fake.requests.count("federated") >= 3, fake.requests
        assert leader.leading() and leader.terms()[-1] == term, leader.text()
        # The fake takes only the rotated token since the rotation: a stale
        # copy of the file's old content would have been refused.
        assert not fake.refused, fake.refused
        _assert_no_secret(leader.text(), [old, fake.federated_token, *fake.issued])
    finally:
        fake.close()


def test_signals_while_the_entra_token_refreshes(azurite_tls, cluster, tmp_path, sighup_default):
    """A refreshing Entra ID source (9 s tokens, workload identity) x SIGHUP
    and SIGTERM to `s3lect run` (what tests/s3/test_s3_signals.py does for the
    AWS sources): the signal reaches run's loop whatever thread the
    refresher runs on, and the lock is handed over by release."""
    from harness.azure_fakes import EntraFake
    from harness.cli import SIGNAL_TIMING, sighup_then_sigterm
    fake = EntraFake(TENANT, CLIENT, lifetime=9)
    try:
        env = _entra_env(fake, "federated", tmp_path)
        nodes = cluster(_lock(azurite_tls, "signals"), env, n=3,
                        extra=[*SIGNAL_TIMING, *_tls_args(azurite_tls)])
        # More token fetches than nodes: at least one was a refresh.
        took = sighup_then_sigterm(nodes, "az:// on Entra ID tokens",
                                   ready=lambda: fake.requests.count("federated") > 3)
        assert not fake.refused, fake.refused
        print(f"handovers after SIGHUP, SIGTERM: {took[0]:.2f} s, {took[1]:.2f} s")
    finally:
        fake.close()


def test_a_blob_lease_on_the_lock_is_a_clear_fatal_error(azurite, cluster):
    """Issue 38 item 9: another client takes an infinite blob lease on the
    lock blob (a backup tool, `az storage blob lease acquire`): every write
    is refused (LeaseIdMissing, 412 on Azurite). Each node says what holds
    the blob and how to break the lease (not a silent `lost_race`), and once
    the lease is broken the lock is led again within a lease."""
    lock = _lock(azurite, "leased")
    blob = lock.split("/", 3)[3]
    container, name = blob.split("/", 1)
    nodes = cluster(lock, _conn_env(azurite), n=2)
    wait_for(lambda: only_leader(nodes), 30, "a leader")
    client = azurite.client()
    client.request("PUT", f"{container}/{name}", {"comp": "lease"},
                   headers={"x-ms-lease-action": "acquire", "x-ms-lease-duration": "-1"})
    leased = time.monotonic()
    try:
        # The leader's next renewal is refused: it steps down, and nobody leads.
        wait_for(lambda: only_leader(nodes) is None, LEASE_S + 10, "the leader to step down")
        wait_for(lambda: all("blob lease break" in n.text() for n in nodes), LEASE_S + 20,
                 "every node to say how to break the lease")
        text = "".join(n.text() for n in nodes)
        assert "another client holds a blob lease" in text, text
        for n in nodes:
            assert n.text().count("az storage blob lease break") <= 2, n.text()
    finally:
        client.request("PUT", f"{container}/{name}", {"comp": "lease"},
                       headers={"x-ms-lease-action": "break", "x-ms-lease-break-period": "0"})
    broken = time.monotonic()
    wait_for(lambda: only_leader(nodes), LEASE_S + 10, "a leader once the lease is broken")
    took = time.monotonic() - broken
    assert took <= LEASE_S + 8.0, f"led again {took:.1f} s after the break (lease {LEASE_S} s)"
    print(f"refused for {broken - leased:.1f} s; led again {took:.1f} s after the break")
