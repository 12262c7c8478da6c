# SPDX-License-Identifier: Apache-2.0
"""Azurite (Microsoft's Azure Storage emulator, blob service only) on a free
127.0.0.1 port.

ensure_azurite() installs azurite@AZURITE_VERSION from npm once into
cache_dir()/azurite-<version>/ (installed in a temporary directory and
renamed into place when complete, so an interrupted install is never taken
as a cache). Each server gets a throwaway account key: the account is
Azurite's usual devstoreaccount1, its key random (AZURITE_ACCOUNTS), so a
test can grep every output for it. Azurite checks Shared Key and SAS
signatures. Its data lives in the work directory (--location), so restart()
keeps containers and blobs.

AzureClient is a small Shared Key client of the tests' own (create a
container, read and write blobs, make SAS tokens): a second implementation
of the signature, independent of libs3lect's.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import hmac
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.pki import issue, make_ca  # noqa: E402
    from harness.servers import Server, ServerStartError, cache_dir  # noqa: E402
else:
    from .pki import issue, make_ca
    from .servers import Server, ServerStartError, cache_dir

AZURITE_VERSION = "3.37.0"
ACCOUNT = "devstoreaccount1"
CONTAINER = "s3lect-test"
API_VERSION = "2021-08-06"


def ensure_azurite() -> Path:
    """The azurite-blob launcher, installing Azurite from npm on first use."""
    root = cache_dir() / f"azurite-{AZURITE_VERSION}"
    launcher = root / "node_modules" / ".bin" / "azurite-blob"
    if launcher.exists():
        return launcher
    npm = shutil.which("npm")
    if not npm or not shutil.which("node"):
        raise ServerStartError("Azurite needs Node.js and npm (apt-get install nodejs npm)")
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"azurite-{AZURITE_VERSION}.", dir=root.parent))
    r = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(tmp),
         f"azurite@{AZURITE_VERSION}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
    )
    if r.returncode != 0 or not (tmp / "node_modules" / ".bin" / "azurite-blob").exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise ServerStartError(f"npm install azurite@{AZURITE_VERSION} failed:\n{r.stdout[-4000:]}")
    try:
        tmp.rename(root)
    except OSError:  # installed meanwhile by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return launcher


def _now_rfc1123() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%a, %d %b %Y %H:%M:%S GMT")


class AzureError(RuntimeError):
    def __init__(self, status: int, code: str, body: str):
        super().__init__(f"HTTP {status} {code}: {body[:300]}")
        self.status = status
        self.code = code


class AzureClient:
    """Shared Key requests to one account's blob endpoint (path-style)."""

    def __init__(self, endpoint: str, account: str, key_b64: str, cafile: str | None = None):
        self.endpoint = endpoint.rstrip("/")  # http://127.0.0.1:PORT/ACCOUNT
        self.account = account
        self.key = base64.b64decode(key_b64)
        self.context = ssl.create_default_context(cafile=cafile) if cafile else None

    def _sign(self, method: str, path: str, query: dict[str, str], headers: dict[str, str]) -> str:
        std = ["Content-Encoding", "Content-Language", "Content-Length", "Content-MD5",
               "Content-Type", "Date", "If-Modified-Since", "If-Match", "If-None-Match",
               "If-Unmodified-Since", "Range"]
        low = {k.lower(): v for k, v in headers.items()}
        parts = [method]
        for h in std:
            v = low.get(h.lower(), "")
            if h == "Content-Length" and v == "0":
                v = ""
            parts.append(v)
        xms = sorted((k, v.strip()) for k, v in low.items() if k.startswith("x-ms-"))
        canon = "".join(f"{k}:{v}\n" for k, v in xms)
        res = f"/{self.account}{path}"
        for k in sorted(query):
            res += f"\n{k.lower()}:{query[k]}"
        sts = "\n".join(parts) + "\n" + canon + res
        mac = hmac.new(self.key, sts.encode(), hashlib.sha256).digest()
        return f"SharedKey {self.account}:{base64.b64encode(mac).decode()}"

    def request(self, method: str, rel: str, query: dict[str, str] | None = None,
                body: bytes | None = None, headers: dict[str, str] | None = None):
        query = query or {}
        u = urllib.parse.urlsplit(self.endpoint)
        path = u.path + "/" + urllib.parse.quote(rel, safe="/-_.~")
        h = {"x-ms-date": _now_rfc1123(), "x-ms-version": API_VERSION}
        h.update(headers or {})
        if body is not None:
            h["Content-Length"] = str(len(body))
            h.setdefault("Content-Type", "application/octet-stream")  # else urllib adds its own
        h["Authorization"] = self._sign(method, path, query, h)
        qs = ("?" + urllib.parse.urlencode(query)) if query else ""
        req = urllib.request.Request(f"{u.scheme}://{u.netloc}{path}{qs}", data=body,
                                     method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.context) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            raise AzureError(e.code, e.headers.get("x-ms-error-code", ""),
                             e.read().decode(errors="replace")) from None

    def create_container(self, name: str) -> None:
        try:
            self.request("PUT", name, {"restype": "container"}, body=b"")
        except AzureError as e:
            if e.code != "ContainerAlreadyExists":
                raise

    def get_blob(self, container: str, blob: str) -> tuple[bytes, str]:
        _, h, body = self.request("GET", f"{container}/{blob}")
        return body, h.get("etag", "")

    def put_blob(self, container: str, blob: str, data: bytes,
                 headers: dict[str, str] | None = None) -> str:
        hh = {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/json"}
        hh.update(headers or {})
        _, h, _ = self.request("PUT", f"{container}/{blob}", body=data, headers=hh)
        return h.get("etag", "")

    def container_sas(self, container: str, permissions: str = "rcw",
                      hours: float = 2.0) -> str:
        """A service SAS for the container (signed version 2020-12-06 layout)."""
        now = _dt.datetime.now(_dt.timezone.utc)
        st = (now - _dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        se = (now + _dt.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        sv, sr, spr = "2020-12-06", "c", "http,https" if self.endpoint.startswith("http:") else "https"
        canon = f"/blob/{self.account}/{container}"
        fields = [permissions, st, se, canon, "", "", spr, sv, sr, "", "", "", "", "", "", ""]
        sts = "\n".join(fields)
        sig = base64.b64encode(hmac.new(self.key, sts.encode(), hashlib.sha256).digest()).decode()
        q = {"sv": sv, "st": st, "se": se, "sr": sr, "sp": permissions, "spr": spr, "sig": sig}
        return urllib.parse.urlencode(q)


class AzuriteServer(Server):
    """https=True: TLS with a certificate for 127.0.0.1 from a CA made here
    (ca_file), and Azure AD bearer tokens accepted (--oauth basic: Azurite
    checks a token's issuer, audience and lifetime, not its signature; it
    takes tokens over HTTPS only)."""

    name = "azurite"

    def __init__(self, container: str = CONTAINER, https: bool = False):
        super().__init__(container)
        self.launcher = ensure_azurite()
        self.account = ACCOUNT
        self.account_key = base64.b64encode(secrets.token_bytes(64)).decode()
        self.container = container
        self.https = https
        self.ca_file: str | None = None
        if https:
            d = self.workdir
            make_ca(d, "ca", subject="/CN=s3lect-test-ca", constraints=False, key="rsa")
            issue(d, "server", "ca", san="IP:127.0.0.1", subject="/CN=127.0.0.1", eku=None,
                  key="rsa")
            self.ca_file = str(d / "ca.pem")

    @property
    def blob_endpoint(self) -> str:
        return f"{'https' if self.https else 'http'}://127.0.0.1:{self.port}/{self.account}"

    def command(self) -> list[str]:
        cmd = [str(self.launcher), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
               "--location", str(self.workdir / "data"), "--silent", "--skipApiVersionCheck",
               "--disableProductStyleUrl"]
        if self.https:
            cmd += ["--cert", str(self.workdir / "server.pem"), "--key",
                    str(self.workdir / "server.key"), "--oauth", "basic"]
        return cmd

    def process_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["AZURITE_ACCOUNTS"] = f"{self.account}:{self.account_key}"
        return env

    def ready(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        try:
            self.client().request("GET", "", {"comp": "list"})
            return True
        except AzureError:
            return True
        except (OSError, ssl.SSLError):
            return False

    def on_ready(self) -> None:
        try:
            self.client().create_container(self.container)
        except (OSError, AzureError) as e:
            raise RuntimeError(f"creating container {self.container}: {e}") from e

    def client(self, key_b64: str | None = None) -> AzureClient:  # type: ignore[override]
        return AzureClient(self.blob_endpoint, self.account, key_b64 or self.account_key,
                           self.ca_file)

    def lock_prefix(self) -> str:
        return f"az://{self.account}/{self.container}/"

    def env(self) -> dict[str, str]:
        """What a node needs: the account key (Shared Key) and the endpoint,
        as one connection string, plus the lock prefix."""
        return {
            "AZURE_STORAGE_CONNECTION_STRING": (
                f"DefaultEndpointsProtocol=http;AccountName={self.account};"
                f"AccountKey={self.account_key};BlobEndpoint={self.blob_endpoint};"
            ),
            "S3LECT_TEST_LOCK_PREFIX": self.lock_prefix(),
        }


if __name__ == "__main__":
    print(ensure_azurite())
    sys.exit(0)
