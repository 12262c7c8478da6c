# SPDX-License-Identifier: Apache-2.0
"""Loopback fakes of Google's token issuers, for the gs:// store's
credential tests (every store operation still goes to fake-gcs-server):

- the OAuth2 token endpoint (POST /token): the jwt-bearer grant of a
  service account (the assertion's RS256 signature verified with the public
  key of the key pair this fake made, and its iss, aud, scope and expiry
  checked), the refresh_token grant of gcloud user credentials, and the
  token-exchange grant of the security token service (workload identity
  federation, the subject token compared);
- the IAM credentials impersonation endpoint
  (POST /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken, with a
  token the STS grant issued);
- the metadata server (GET /computeMetadata/v1/instance/service-accounts/
  default/token and /email, Metadata-Flavor: Google required).

Tokens live `lifetime` seconds; `fail_status` makes every token request
fail with that status (a refresh that fails); `issued` holds every token
handed out, `valid(token)` says whether one is current. Secrets of the
files it writes are random per fake, so a test can grep every output for
them.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SA_EMAIL = "s3lect-test@example-project.iam.gserviceaccount.com"
STORAGE_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"


def _b64d(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class GcpFakes:
    def __init__(self, lifetime: int = 3600):
        self.lifetime = lifetime
        self.fail_status = 0
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.private_pem = self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode()
        self.client_secret = "cs-" + secrets.token_hex(12)
        self.refresh_token = "1//rt-" + secrets.token_hex(16)
        self.subject_token = "subj-" + secrets.token_hex(16)
        self.audience = "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q"
        # The AWS identity source: the keys a test exports, the region.
        self.aws_key_id = "AKIA" + secrets.token_hex(8).upper()
        self.aws_secret = "aws-" + secrets.token_hex(16)
        self.aws_region = "eu-west-3"
        self.issued: dict[str, float] = {}  # token -> expiry (time.time())
        self.sts_issued: set[str] = set()
        self.requests: list[str] = []  # "grant:jwt-bearer", "metadata", ...
        self.errors: list[str] = []  # why a request was refused
        self._lock = threading.Lock()
        fakes = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, status: int, body: dict | str, ctype: str = "application/json"):
                data = (json.dumps(body) if isinstance(body, dict) else body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                fakes._get(self)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                fakes._post(self, self.rfile.read(n).decode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- tokens ----

    def _issue(self, prefix: str = "ya29.") -> tuple[str, int]:
        tok = prefix + secrets.token_urlsafe(24)
        with self._lock:
            self.issued[tok] = time.time() + self.lifetime
        return tok, self.lifetime

    def valid(self, token: str) -> bool:
        with self._lock:
            exp = self.issued.get(token)
        return exp is not None and exp > time.time()

    def check_request(self, raw: bytes) -> bool:
        """For ThrottleProxy(check=...): the request carries a current token."""
        for line in raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"authorization":
                v = v.strip().decode(errors="replace")
                return v.startswith("Bearer ") and self.valid(v[7:])
        return False

    def secrets(self) -> list[str]:
        """Everything that must never appear in an output."""
        body = "".join(self.private_pem.splitlines()[1:-1])
        with self._lock:
            toks = list(self.issued)
        return [body[:40], body[100:140], self.client_secret, self.refresh_token,
                self.subject_token, self.aws_secret] + toks

    # ---- files a test points GOOGLE_APPLICATION_CREDENTIALS at ----

    def service_account_file(self, d: Path, pem: str | None = None) -> Path:
        p = d / "sa.json"
        p.write_text(json.dumps({
            "type": "service_account", "project_id": "example-project",
            "private_key_id": "kid-" + secrets.token_hex(4),
            "private_key": pem or self.private_pem, "client_email": SA_EMAIL,
            "client_id": "123", "token_uri": f"{self.url}/token"}))
        return p

    def authorized_user_file(self, d: Path) -> Path:
        p = d / "application_default_credentials.json"
        p.write_text(json.dumps({
            "type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
            "client_secret": self.client_secret, "refresh_token": self.refresh_token,
            "token_uri": f"{self.url}/token"}))
        return p

    def external_account_file(self, d: Path, fmt: str = "text", impersonate: bool = True) -> Path:
        tokfile = d / "subject-token"
        stt = "urn:ietf:params:oauth:token-type:jwt"
        if fmt == "aws":
            stt = "urn:ietf:params:aws:token-type:aws4_request"
            source = {"environment_id": "aws1",
                      "regional_cred_verification_url":
                          "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15"}
        elif fmt == "json":
            tokfile.write_text(json.dumps({"id_token": self.subject_token}))
            source = {"file": str(tokfile), "format": {"type": "json",
                                                       "subject_token_field_name": "id_token"}}
        else:
            tokfile.write_text(self.subject_token + "\n")
            source = {"file": str(tokfile)}
        cfg = {"type": "external_account", "audience": self.audience,
               "subject_token_type": stt,
               "token_url": f"{self.url}/token", "credential_source": source}
        if impersonate:
            cfg["service_account_impersonation_url"] = (
                f"{self.url}/v1/projects/-/serviceAccounts/{SA_EMAIL}:generateAccessToken")
        p = d / "federation.json"
        p.write_text(json.dumps(cfg))
        return p

    # ---- handlers ----

    def _refuse(self, h, status: int, error: str, desc: str) -> None:
        with self._lock:
            self.errors.append(f"{error}: {desc}")
        h._send(status, {"error": error, "error_description": desc})

    def _post(self, h, body: str) -> None:
        path = urllib.parse.urlparse(h.path).path
        if self.fail_status:
            h._send(self.fail_status, {"error": "unavailable", "error_description": "try later"})
            return
        if path.endswith(":generateAccessToken"):
            auth = h.headers.get("Authorization", "")
            with self._lock:
                ok = auth.startswith("Bearer ") and auth[7:] in self.sts_issued
                self.requests.append("impersonate")
            if not ok:
                h._send(401, {"error": {"code": 401, "message": "bad federated token"}})
                return
            req = json.loads(body or "{}")
            if STORAGE_SCOPE not in req.get("scope", []):
                h._send(400, {"error": {"code": 400, "message": f"scope {req.get('scope')}"}})
                return
            tok, life = self._issue()
            exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + life))
            h._send(200, {"accessToken": tok, "expireTime": exp})
            return
        if path != "/token":
            h._send(404, {"error": "not_found"})
            return
        form = dict(urllib.parse.parse_qsl(body))
        grant = form.get("grant_type", "")
        with self._lock:
            self.requests.append("grant:" + grant.rsplit(":", 1)[-1])
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            why = self._check_jwt(form.get("assertion", ""))
            if why:
                self._refuse(h, 400, "invalid_grant", why)
                return
        elif grant == "refresh_token":
            if (form.get("client_secret") != self.client_secret
                    or form.get("refresh_token") != self.refresh_token):
                self._refuse(h, 400, "invalid_grant", "Bad Request")
                return
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            if form.get("subject_token_type") == "urn:ietf:params:aws:token-type:aws4_request":
                why = self._check_aws(form.get("subject_token", ""))
                ok = not why
            else:
                why = "The subject token is invalid"
                ok = form.get("subject_token") == self.subject_token
            if not ok or form.get("audience") != self.audience:
                self._refuse(h, 400, "invalid_grant", why or "audience")
                return
            tok, life = self._issue("sts.")
            with self._lock:
                self.sts_issued.add(tok)
            h._send(200, {"access_token": tok, "expires_in": life, "token_type": "Bearer",
                          "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
            return
        else:
            self._refuse(h, 400, "unsupported_grant_type", grant)
            return
        tok, life = self._issue()
        h._send(200, {"access_token": tok, "expires_in": life, "token_type": "Bearer"})

    def _check_jwt(self, jwt: str) -> str:
        try:
            h64, c64, s64 = jwt.split(".")
            self.key.public_key().verify(_b64d(s64), f"{h64}.{c64}".encode(), padding.PKCS1v15(),
                                         hashes.SHA256())
            header, claims = json.loads(_b64d(h64)), json.loads(_b64d(c64))
        except Exception as e:  # noqa: BLE001 - any failure is a refusal
            return f"Invalid JWT Signature. ({type(e).__name__})"
        now = time.time()
        if header.get("alg") != "RS256":
            return f"alg {header.get('alg')}"
        if claims.get("iss") != SA_EMAIL or claims.get("aud") != f"{self.url}/token":
            return "Invalid JWT: iss or aud"
        if claims.get("scope") != STORAGE_SCOPE:
            return f"Invalid JWT: scope {claims.get('scope')}"
        if not (claims.get("iat", 0) <= now + 5 and now < claims.get("exp", 0) <= now + 3605):
            return "Invalid JWT: Token must be a short-lived token"
        return ""

    def _check_aws(self, token: str) -> str:
        """A serialized GetCallerIdentity request signed with the test's keys
        for the region's STS (what Google's STS replays to AWS)."""
        try:
            req = json.loads(urllib.parse.unquote(token))
            headers = {x["key"].lower(): x["value"] for x in req["headers"]}
        except (ValueError, KeyError, TypeError) as e:
            return f"not a serialized AWS request ({type(e).__name__})"
        want_url = (f"https://sts.{self.aws_region}.amazonaws.com"
                    "?Action=GetCallerIdentity&Version=2011-06-15")
        if req.get("url") != want_url or req.get("method") != "POST":
            return f"url/method {req.get('url')} {req.get('method')}"
        auth = headers.get("authorization", "")
        date = headers.get("x-amz-date", "")
        scope = f"Credential={self.aws_key_id}/{date[:8]}/{self.aws_region}/sts/aws4_request"
        if not auth.startswith("AWS4-HMAC-SHA256 ") or scope not in auth or "Signature=" not in auth:
            return "the request is not signed with the AWS keys for the region's STS"
        if "x-goog-cloud-target-resource" not in auth or \
                headers.get("x-goog-cloud-target-resource") != self.audience:
            return "x-goog-cloud-target-resource missing or not signed"
        if headers.get("host") != f"sts.{self.aws_region}.amazonaws.com":
            return "host"
        # Recompute the signature (SigV4, as AWS would).
        import hashlib
        import hmac
        signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
        canon = "\n".join(["POST", "/", "Action=GetCallerIdentity&Version=2011-06-15",
                           "".join(f"{k}:{headers[k].strip()}\n" for k in signed),
                           ";".join(signed), hashlib.sha256(b"").hexdigest()])
        sts = "\n".join(["AWS4-HMAC-SHA256", date,
                         f"{date[:8]}/{self.aws_region}/sts/aws4_request",
                         hashlib.sha256(canon.encode()).hexdigest()])
        k = ("AWS4" + self.aws_secret).encode()
        for part in (date[:8], self.aws_region, "sts", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        if auth.split("Signature=")[1] != sig:
            return "SignatureDoesNotMatch"
        return ""

    def _get(self, h) -> None:
        path = urllib.parse.urlparse(h.path).path
        if not path.startswith("/computeMetadata/v1/"):
            h._send(404, "not found", "text/plain")
            return
        if h.headers.get("Metadata-Flavor") != "Google":
            h._send(403, "Missing Metadata-Flavor:Google header.", "text/plain")
            return
        with self._lock:
            self.requests.append("metadata:" + path.rsplit("/", 1)[-1])
        if self.fail_status:
            h._send(self.fail_status, "unavailable", "text/plain")
        elif path.endswith("/service-accounts/default/token"):
            tok, life = self._issue()
            h._send(200, {"access_token": tok, "expires_in": life, "token_type": "Bearer"})
        elif path.endswith("/service-accounts/default/email"):
            h._send(200, SA_EMAIL, "application/text")
        else:
            h._send(404, "not found", "text/plain")
