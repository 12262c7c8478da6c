# SPDX-License-Identifier: Apache-2.0
"""The gs:// store beyond the shared store tests (test_stores_cli.py runs
election, failover, handover, compare-and-set, restart and outage on it):
throttling, bad URLs and credentials, and every Google credential source end
to end.

Every store operation goes to fake-gcs-server (tests/harness/fake_gcs.py).
fake-gcs-server accepts any token, so the credential tests put an
authenticating proxy in front of it (throttle_proxy.ThrottleProxy with a
check): a request without a token the loopback token fakes
(tests/harness/gcp_fakes.py) issued and that is still valid is answered 401.
Every output is grepped for the fakes' throwaway secrets.
"""

from __future__ import annotations

import http.server
import itertools
import json
import re
import secrets
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from harness.cli import CHECK_STORE_PASSED, FAST, check_store_verdict, only_leader, run, wait_for
from storeutil import gcs_env

# Suite stores runs this file in its second pytest session (scripts/test).
pytestmark = pytest.mark.second_session

LEASE_S = 3.0


@pytest.fixture
def fakes():
    from harness.gcp_fakes import GcpFakes
    f = GcpFakes()
    yield f
    f.close()


@pytest.fixture
def auth_proxy(fake_gcs, fakes):
    """fake-gcs-server behind a proxy that requires a token the fakes issued."""
    from throttle_proxy import GCS_THROTTLE, ThrottleProxy
    p = ThrottleProxy(fake_gcs.port, GCS_THROTTLE, b"429 Too Many Requests", check=fakes.check_request)
    yield p
    p.close()


def lock_url(fake_gcs, name: str) -> str:
    return f"gs://{fake_gcs.bucket}/{name}-{secrets.token_hex(4)}"


def cred_env(fake_gcs, proxy, **extra: str) -> dict[str, str]:
    env = gcs_env(fake_gcs)
    env["STORAGE_EMULATOR_HOST"] = f"127.0.0.1:{proxy.port}"
    env.update(extra)
    return env


def assert_no_secret(fakes, *texts: str) -> None:
    blob = "\n".join(texts)
    for s in fakes.secrets():
        assert s not in blob, f"a secret ({s[:6]}...) appears in an output"


def one_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{text}"
    return lines[0]


# ---- throttling ----

def test_gcs_throttling_is_ridden_out(fake_gcs, cluster):
    from throttle_proxy import GCS_THROTTLE, ThrottleProxy, ride_out
    for status in (b"429 Too Many Requests", b"503 Service Unavailable"):
        proxy = ThrottleProxy(fake_gcs.port, GCS_THROTTLE, status)
        try:
            env = dict(gcs_env(fake_gcs), STORAGE_EMULATOR_HOST=f"127.0.0.1:{proxy.port}")
            nodes = cluster(lock_url(fake_gcs, "throttle"), env, n=2)
            ride_out(proxy, nodes, LEASE_S, ["temporary failure", status.split()[0].decode()])
        finally:
            for n in nodes:
                n.stop()
            proxy.close()


# ---- bad URLs and credentials ----

@pytest.mark.parametrize("url,want", [
    ("gs://bucket", "needs a bucket and an object"),
    ("gs://bucket/", "needs a bucket and an object"),
    ("gs://Bad_Bucket/k", "invalid character"),
    ("gs://ab/k", "3 to 63"),
    ("gs://-bucket/k", "start and end with a letter or digit"),
    ("gs://bucket/a//b", "segment"),
    ("gs://bucket/k?x=1", "query or fragment"),
    ("gs:/bucket/k", "gs://bucket/object"),
    ("gcs://bucket/k", "gs://BUCKET/OBJECT"),
])
def test_gcs_bad_urls_are_one_clear_line(s3lect_bin, url, want):
    r = run([str(s3lect_bin), "status", url], gcs_env_none())
    assert r.returncode == 2, r
    line = one_line(r.stderr)
    assert want in line, line


def gcs_env_none() -> dict[str, str]:
    from storeutil import _base
    return _base()


def test_gcs_bad_credentials_are_one_clear_line(fake_gcs, fakes, auth_proxy, s3lect_bin, tmp_path):
    lock = lock_url(fake_gcs, "badcreds")
    # A key file that is not there.
    env = cred_env(fake_gcs, auth_proxy, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "none.json"))
    r = run([str(s3lect_bin), "status", lock], env)
    line = one_line(r.stderr)
    assert r.returncode == 1 and "none.json" in line and "No such file" in line, line
    # Not JSON; an unknown type.
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    r = run([str(s3lect_bin), "status", lock], dict(env, GOOGLE_APPLICATION_CREDENTIALS=str(bad)))
    assert r.returncode == 1 and "not a JSON object" in one_line(r.stderr), r.stderr
    bad.write_text(json.dumps({"type": "impersonated_something"}))
    r = run([str(s3lect_bin), "status", lock], dict(env, GOOGLE_APPLICATION_CREDENTIALS=str(bad)))
    assert r.returncode == 1 and "impersonated_something" in one_line(r.stderr), r.stderr
    # A service account key the token endpoint does not know (another key pair).
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode()
    d = tmp_path / "other"
    d.mkdir()
    sa = fakes.service_account_file(d, pem=other)
    r = run([str(s3lect_bin), "status", lock], dict(env, GOOGLE_APPLICATION_CREDENTIALS=str(sa)))
    line = one_line(r.stderr)
    assert r.returncode == 1 and "Invalid JWT Signature" in line and "HTTP 400" in line, line
    assert "s3lect-test@" in line, line
    # A revoked refresh token says to log in again.
    d = tmp_path / "user"
    d.mkdir()
    au = fakes.authorized_user_file(d)
    au.write_text(au.read_text().replace(fakes.refresh_token, "1//revoked"))
    r = run([str(s3lect_bin), "status", lock], dict(env, GOOGLE_APPLICATION_CREDENTIALS=str(au)))
    line = one_line(r.stderr)
    assert r.returncode == 1 and "invalid_grant" in line and "application-default login" in line, line
    # A token the server refuses: AUTH, naming the source and the permission.
    r = run([str(s3lect_bin), "status", lock],
            dict(env, GOOGLE_OAUTH_ACCESS_TOKEN="ya29.not-issued-" + secrets.token_hex(8)))
    assert r.returncode == 1, r
    assert "GOOGLE_OAUTH_ACCESS_TOKEN" in r.stderr and "storage.objects.get" in r.stderr, r.stderr
    assert "not-issued" not in r.stderr
    assert_no_secret(fakes, r.stdout, r.stderr)


def test_gcs_real_endpoint_is_never_unauthenticated(s3lect_bin, tmp_path):
    """No credentials and Google's endpoint: the chain ends at the metadata
    server (here a closed port) and fails; it never goes without a token."""
    env = dict(gcs_env_none(), GCE_METADATA_HOST="127.0.0.1:1", HOME=str(tmp_path))
    r = run([str(s3lect_bin), "status", "gs://some-bucket/k", "--endpoint",
             "https://storage.googleapis.invalid"], env)
    assert r.returncode == 1
    line = one_line(r.stderr)
    assert "metadata server" in line and "127.0.0.1:1" in line, line
    # whoami says the same: no token, not usable.
    r = run([str(s3lect_bin), "whoami", "gs://some-bucket/k", "--endpoint",
             "https://storage.googleapis.invalid", "--json"], env)
    assert r.returncode == 1 and not json.loads(r.stdout)["usable"], (r.stdout, r.stderr)


def test_gcs_whoami_on_an_emulator_says_no_token_is_needed(fake_gcs, s3lect_bin, tmp_path):
    """With no Google credentials configured, requests to an emulator go
    without a token (as the store sends them); whoami says so rather than
    "no Google credentials found"."""
    env = dict(gcs_env_none(), HOME=str(tmp_path), **fake_gcs.env())
    lock = lock_url(fake_gcs, "whoami")
    r = run([str(s3lect_bin), "whoami", lock, "--json"], env)
    assert r.returncode == 0, r.stderr
    who = json.loads(r.stdout)
    assert who["usable"] and who["source"].startswith("none needed: an emulator"), who
    r = run([str(s3lect_bin), "whoami", lock], env)
    assert r.returncode == 0 and r.stdout.startswith("credentials: none needed"), r.stdout
    assert "expires" not in r.stdout, r.stdout


# ---- each credential source end to end ----

SOURCES = ["service_account", "authorized_user", "authorized_user_adc", "external_file_text",
           "external_file_json", "external_no_impersonation", "external_aws", "metadata"]


def source_env(kind: str, fakes, fake_gcs, proxy, d: Path) -> tuple[dict[str, str], str, str]:
    """(env, what whoami names as the source, the principal) for kind."""
    from harness.gcp_fakes import SA_EMAIL
    if kind == "service_account":
        p = fakes.service_account_file(d)
        return cred_env(fake_gcs, proxy, GOOGLE_APPLICATION_CREDENTIALS=str(p)), \
            "service account key", SA_EMAIL
    if kind == "authorized_user":
        p = fakes.authorized_user_file(d)
        return cred_env(fake_gcs, proxy, GOOGLE_APPLICATION_CREDENTIALS=str(p)), \
            "authorized_user", ""
    if kind == "authorized_user_adc":
        fakes.authorized_user_file(d)
        return cred_env(fake_gcs, proxy, CLOUDSDK_CONFIG=str(d)), \
            "gcloud application-default credentials", ""
    if kind == "external_aws":
        p = fakes.external_account_file(d, "aws")
        return cred_env(fake_gcs, proxy, GOOGLE_APPLICATION_CREDENTIALS=str(p),
                        AWS_ACCESS_KEY_ID=fakes.aws_key_id, AWS_SECRET_ACCESS_KEY=fakes.aws_secret,
                        AWS_REGION=fakes.aws_region), "external_account", SA_EMAIL
    if kind.startswith("external"):
        p = fakes.external_account_file(d, "json" if kind.endswith("json") else "text",
                                        impersonate=kind != "external_no_impersonation")
        return cred_env(fake_gcs, proxy, GOOGLE_APPLICATION_CREDENTIALS=str(p)), \
            "external_account", "" if kind == "external_no_impersonation" else SA_EMAIL
    assert kind == "metadata"
    return cred_env(fake_gcs, proxy, GCE_METADATA_HOST=f"127.0.0.1:{fakes.port}",
                    HOME=str(d)), "metadata server", SA_EMAIL


@pytest.mark.parametrize("kind", SOURCES)
def test_gcs_credential_source_end_to_end(kind, fake_gcs, fakes, auth_proxy, s3lect_bin, tmp_path):
    env, source, principal = source_env(kind, fakes, fake_gcs, auth_proxy, tmp_path)
    lock = lock_url(fake_gcs, kind)
    outs = []
    r = run([str(s3lect_bin), "whoami", lock, "--json"], env)
    outs += [r.stdout, r.stderr]
    assert r.returncode == 0, r.stderr
    who = json.loads(r.stdout)
    assert source in who["source"] and who["usable"], who
    assert (who["principal"] or "") == principal, who
    assert who["expires"], who
    r = run([str(s3lect_bin), "run", lock, "--id", "n1", *FAST, "--", "true"], env, timeout=60)
    outs += [r.stdout, r.stderr]
    assert r.returncode == 0, r.stderr
    assert "acquired leadership" in r.stderr, r.stderr
    r = run([str(s3lect_bin), "status", lock, "--json"], env)
    outs += [r.stdout, r.stderr]
    assert r.returncode in (0, 3) and json.loads(r.stdout), r.stderr
    assert auth_proxy.forwarded >= 3 and auth_proxy.refused == 0, (auth_proxy.forwarded,
                                                                   auth_proxy.refused)
    # Without the source the proxy refuses: the test can fail.
    r = run([str(s3lect_bin), "status", lock], cred_env(fake_gcs, auth_proxy,
                                                         GOOGLE_OAUTH_ACCESS_TOKEN="ya29.x"))
    assert r.returncode == 1 and auth_proxy.refused > 0
    assert_no_secret(fakes, *outs)


def test_gcs_token_refreshed_in_the_background(fake_gcs, fakes, auth_proxy, cluster, tmp_path):
    """Tokens that live 9 s: the leader keeps leading across several of them,
    each refreshed before it expires; a failing token endpoint is warned
    about while the current token is still used, and a refresh that works
    again in time costs nothing; all without a secret in the log."""
    fakes.lifetime = 9
    env, _, _ = source_env("service_account", fakes, fake_gcs, auth_proxy, tmp_path)
    nodes = cluster(lock_url(fake_gcs, "refresh"), env, n=1)
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    term = leader.terms()[-1]
    time.sleep(14)
    assert leader.leading() and leader.terms()[-1] == term, leader.text()
    grants = fakes.requests.count("grant:jwt-bearer")
    assert grants >= 3, f"only {grants} token fetches in 14 s of 9 s tokens"
    assert auth_proxy.refused == 0, leader.text()
    fakes.fail_status = 503
    try:
        wait_for(lambda: "refreshing the credentials from" in leader.text(), 10,
                 "the refresh failure warning")
    finally:
        fakes.fail_status = 0
    assert "still used" in leader.text() and "HTTP 503" in leader.text()
    time.sleep(3)
    assert leader.leading() and leader.terms()[-1] == term, leader.text()
    assert auth_proxy.refused == 0, leader.text()
    assert_no_secret(fakes, leader.text())


def test_gcs_signals_while_the_token_refreshes(fake_gcs, fakes, auth_proxy, cluster, tmp_path,
                                               sighup_default):
    """A refreshing Google token source (9 s tokens from the metadata server)
    x SIGHUP and SIGTERM to `s3lect run` (what tests/s3/test_s3_signals.py does
    for the AWS sources): the signal reaches run's loop whatever thread the
    refresher runs on, and the lock is handed over by release."""
    from harness.cli import SIGNAL_TIMING, sighup_then_sigterm
    fakes.lifetime = 9
    env, _, _ = source_env("metadata", fakes, fake_gcs, auth_proxy, tmp_path)
    nodes = cluster(lock_url(fake_gcs, "signals"), env, n=3, extra=SIGNAL_TIMING)
    # More token fetches than nodes: at least one was a refresh, so the
    # refresher had run when the signals came.
    took = sighup_then_sigterm(nodes, "gs:// on metadata-server tokens",
                               ready=lambda: fakes.requests.count("metadata:token") > 3)
    assert auth_proxy.refused == 0
    print(f"handovers after SIGHUP, SIGTERM: {took[0]:.2f} s, {took[1]:.2f} s")


# ---- check-store against a server that ignores ifGenerationMatch ----

class _CarelessGcsServer(http.server.ThreadingHTTPServer):
    """Answers the JSON API's object read and media upload like GCS but
    ignores ifGenerationMatch: every upload lands. What check-store must
    catch (a store without compare-and-swap cannot elect one leader)."""

    daemon_threads = True

    def __init__(self):
        self.objects: dict[str, tuple[bytes, int]] = {}
        self.generations = itertools.count(1)
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _CarelessGcsHandler)


class _CarelessGcsHandler(http.server.BaseHTTPRequestHandler):
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

    def _name(self) -> str:
        u = urllib.parse.urlsplit(self.path)
        if u.path.startswith("/upload/"):
            return urllib.parse.parse_qs(u.query).get("name", [""])[0]
        return urllib.parse.unquote(u.path.split("/o/", 1)[-1])

    def do_GET(self):
        with self.server.lock:
            got = self.server.objects.get(self._name())
        if not got:
            self._answer(404, b'{"error":{"code":404,"message":"No such object"}}',
                         {"Content-Type": "application/json"})
        else:
            self._answer(200, got[0], {"x-goog-generation": str(got[1])})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        name = self._name()
        with self.server.lock:
            gen = next(self.server.generations)
            self.server.objects[name] = (body, gen)
        meta = json.dumps({"name": name, "generation": str(gen)}).encode()
        self._answer(200, meta, {"Content-Type": "application/json",
                                 "x-goog-generation": str(gen)})

    def do_DELETE(self):
        with self.server.lock:
            self.server.objects.pop(self._name(), None)
        self._answer(204)


def test_check_store_passes_on_the_emulator_and_fails_without_conditions(fake_gcs, s3lect_bin):
    r = run([str(s3lect_bin), "check-store", f"gs://{fake_gcs.bucket}/check.json", "--racers",
             "4", "--rounds", "2"], gcs_env(fake_gcs), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert check_store_verdict(r.stdout) == CHECK_STORE_PASSED
    # It names the credentials it used: none, on an emulator.
    assert "credentials: none needed: an emulator" in r.stdout, r.stdout
    srv = _CarelessGcsServer()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        env = gcs_env(fake_gcs)
        env.pop("STORAGE_EMULATOR_HOST", None)
        r = run([str(s3lect_bin), "check-store", "gs://careless/check.json", "--endpoint",
                 f"http://127.0.0.1:{srv.server_address[1]}", "--racers", "4", "--rounds", "2"],
                env, timeout=120)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "FAIL" in r.stdout, r.stdout + r.stderr
        assert re.fullmatch(r"\d of 7 checks FAILED: .*do not use it for s3lect",
                            check_store_verdict(r.stdout)), r.stdout
    finally:
        srv.shutdown()
        srv.server_close()
