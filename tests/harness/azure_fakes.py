# SPDX-License-Identifier: Apache-2.0
"""Loopback fakes of the Azure AD (Entra ID) token issuers, for the Azure
Blob store's token sources (libs3lect/src/azure/az_creds.c): the authority's
token endpoint (POST /TENANT/oauth2/v2.0/token: client secret, client
certificate assertion, federated token), the VM's IMDS (GET
/metadata/identity/oauth2/token with Metadata: true) and App Service's
identity endpoint (GET /msi/token with X-IDENTITY-HEADER).

Each checks what the real one checks of the request (the secret, the
assertion's RS256 signature against the registered certificate and its x5t
thumbprint, the federated token, the headers, the scope or resource) and
answers with a JWT whose claims Azurite (--oauth basic) accepts: issuer
https://sts.windows.net/TENANT/, audience https://storage.azure.com, a
lifetime of `lifetime` seconds. Only the store operations go to Azurite;
these issue tokens.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import secrets
import subprocess
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

from harness.pki import make_ca

SCOPE = "https://storage.azure.com/.default"
RESOURCE = "https://storage.azure.com/"


def b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def unb64url(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def make_cert(d: Path) -> tuple[Path, str]:
    """A self-signed RSA certificate and its key in one PEM file (what
    AZURE_CLIENT_CERTIFICATE_PATH names), and its x5t (SHA-1 thumbprint)."""
    crt, key = make_ca(d, "client-cert", subject="/CN=s3lect-client", constraints=False,
                       key="rsa")
    der = subprocess.run(["openssl", "x509", "-in", str(crt), "-outform", "DER"], check=True,
                         capture_output=True, timeout=60).stdout
    pem = d / "client.pem"
    pem.write_text(key.read_text() + crt.read_text())
    return pem, b64url(hashlib.sha1(der).digest())


class EntraFake(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, tenant: str, client_id: str, lifetime: int = 3600):
        self.tenant = tenant
        self.client_id = client_id
        self.secret = "s3lect-test-secret-" + secrets.token_hex(12)
        self.federated_token = "s3lect-fed-" + secrets.token_hex(16)
        self.identity_header = "s3lect-idh-" + secrets.token_hex(12)
        self.cert_pem: Path | None = None
        self.x5t = ""
        self.lifetime = lifetime
        self.oid = "00000000-0000-0000-0000-" + secrets.token_hex(6)
        self.issued: list[str] = []  # tokens handed out
        self.requests: list[str] = []  # "client_secret", "certificate", "federated", "imds", ...
        self.refused: list[str] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def use_certificate(self, d: Path) -> Path:
        self.cert_pem, self.x5t = make_cert(d)
        return self.cert_pem

    def close(self) -> None:
        self.shutdown()
        self.server_close()

    def token(self) -> str:
        now = int(time.time())
        claims = {"aud": "https://storage.azure.com", "iss": f"https://sts.windows.net/{self.tenant}/",
                  "iat": now, "nbf": now - 60, "exp": now + self.lifetime,
                  "appid": self.client_id, "oid": self.oid, "tid": self.tenant}
        tok = ".".join([b64url(json.dumps({"alg": "RS256", "typ": "JWT"}).encode()),
                        b64url(json.dumps(claims).encode()), b64url(secrets.token_bytes(64))])
        with self.lock:
            self.issued.append(tok)
        return tok

    def verify_assertion(self, assertion: str, aud: str) -> str | None:
        """None if the client assertion is good, else why not."""
        try:
            h, c, sig = assertion.split(".")
            header, claims = json.loads(unb64url(h)), json.loads(unb64url(c))
        except ValueError:
            return "not a JWT"
        if header.get("alg") != "RS256" or header.get("x5t") != self.x5t:
            return f"header {header}"
        now = time.time()
        if (claims.get("aud") != aud or claims.get("iss") != self.client_id or
                claims.get("sub") != self.client_id or not claims.get("jti") or
                not claims.get("exp", 0) > now or not claims.get("nbf", now + 1) <= now):
            return f"claims {claims}"
        assert self.cert_pem is not None
        with tempfile.TemporaryDirectory() as t:
            pub = Path(t) / "pub.pem"
            subprocess.run(["openssl", "x509", "-in", str(self.cert_pem), "-pubkey", "-noout",
                            "-out", str(pub)], check=True, capture_output=True)
            (Path(t) / "sig").write_bytes(unb64url(sig))
            r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", str(pub), "-signature",
                                str(Path(t) / "sig")], input=f"{h}.{c}".encode(),
                               capture_output=True)
        return None if r.returncode == 0 else "bad signature"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EntraFake

    def log_message(self, *args):
        pass

    def _json(self, code: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, kind: str, why: str, code: int = 401) -> None:
        with self.server.lock:
            self.server.refused.append(f"{kind}: {why}")
        self._json(code, {"error": "invalid_client", "error_description": f"AADSTS7000215: {why}"})

    def do_POST(self):
        srv = self.server
        n = int(self.headers.get("Content-Length", "0"))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
        path = urllib.parse.urlsplit(self.path).path
        if path != f"/{srv.tenant}/oauth2/v2.0/token":
            return self._refuse("token", f"no tenant at {path}", 400)
        if (form.get("grant_type") != "client_credentials" or form.get("scope") != SCOPE or
                form.get("client_id") != srv.client_id):
            return self._refuse("token", f"bad form {sorted(form)}", 400)
        if "client_secret" in form:
            kind = "client_secret"
            ok = form["client_secret"] == srv.secret
            why = "wrong secret"
        elif form.get("client_assertion_type") == \
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            a = form.get("client_assertion", "")
            if a == srv.federated_token:
                kind, ok, why = "federated", True, ""
            else:
                kind = "certificate"
                why = srv.verify_assertion(a, f"{srv.url}{path}") if srv.cert_pem else "no cert"
                ok = why is None
        else:
            return self._refuse("token", "no credential", 400)
        if not ok:
            return self._refuse(kind, why or "refused")
        with srv.lock:
            srv.requests.append(kind)
        self._json(200, {"token_type": "Bearer", "expires_in": srv.lifetime,
                         "ext_expires_in": srv.lifetime, "access_token": srv.token()})

    def do_GET(self):
        srv = self.server
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if u.path == "/metadata/identity/oauth2/token":
            kind, ok = "imds", (self.headers.get("Metadata") == "true" and
                                q.get("api-version") == "2018-02-01")
        elif u.path == "/msi/token":
            kind, ok = "appservice", (self.headers.get("X-IDENTITY-HEADER") == srv.identity_header
                                      and q.get("api-version") == "2019-08-01")
        else:
            return self._refuse("get", f"no such path {u.path}", 404)
        if not ok or q.get("resource") != RESOURCE:
            return self._refuse(kind, "bad headers or query", 400)
        with srv.lock:
            srv.requests.append(kind)
        exp = int(time.time()) + srv.lifetime
        self._json(200, {"access_token": srv.token(), "expires_in": str(srv.lifetime),
                         "expires_on": str(exp), "resource": RESOURCE, "token_type": "Bearer",
                         "client_id": srv.client_id})
