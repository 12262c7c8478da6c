# SPDX-License-Identifier: Apache-2.0
"""etcd (Debian's etcd-server package, `etcd` 3.4 or later) as a one-member
cluster on free 127.0.0.1 ports, for the etcd:// store's tests.

EtcdServer runs it with its data in the work directory, so restart() keeps
the keys and their revisions. Variants:

  EtcdServer()                 plain HTTP, no authentication
  EtcdServer(tls=pki)          HTTPS with a server certificate from pki (make_pki)
                               and client certificates required
  EtcdServer(auth=True)        a root user and a user APP_USER whose role may
                               read and write only the key range under
                               APP_PREFIX; token_ttl sets --auth-token-ttl

env() exports S3LECT_TEST_ETCD_ENDPOINT and
S3LECT_TEST_LOCK_PREFIX=etcd://127.0.0.1:PORT/s3lect-test/ (what
`servers.py with-etcd` exports). The user and role are made with etcdctl
(Debian's etcd-client), which the harness also uses to enable
authentication.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from harness.pki import issue, make_ca  # noqa: E402
    from harness.servers import Server, ServerStartError, free_port  # noqa: E402
else:
    from .pki import issue, make_ca
    from .servers import Server, ServerStartError, free_port

PREFIX = "s3lect-test/"
APP_USER = "s3lect-app"
APP_PREFIX = "s3lect-app/"


def etcd_binary() -> str:
    for name in ("etcd",):
        path = shutil.which(name) or (f"/usr/bin/{name}" if os.access(f"/usr/bin/{name}",
                                                                       os.X_OK) else None)
        if path:
            return path
    raise ServerStartError("etcd is not installed: scripts/deps installs Debian's etcd-server "
                           "(apt-get install etcd-server etcd-client)")


def make_pki(d: Path) -> dict[str, Path]:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost, a client
    certificate (CN=client) from it, and an unrelated CA: paths by name (ca,
    server, server-key, client, client-key, other-ca). tests/harness/pki.py's."""
    d.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        make_ca(d, ca, subject=f"/CN=s3lect etcd test {ca}")
    for name in ("server", "client"):
        issue(d, name, "ca", san="IP:127.0.0.1,DNS:localhost")
    return {"ca": d / "ca.pem", "server": d / "server.pem", "server-key": d / "server.key",
            "client": d / "client.pem", "client-key": d / "client.key",
            "other-ca": d / "other-ca.pem"}


class EtcdServer(Server):
    name = "etcd"

    def __init__(self, tls: dict[str, Path] | None = None, auth: bool = False,
                 token_ttl: int | None = None, binary: str | None = None):
        super().__init__("s3lect-test")
        self.binary = binary or etcd_binary()
        self.tls = tls
        self.auth = auth
        self.token_ttl = token_ttl
        self.peer_port = 0
        self.root_password = secrets.token_hex(12)
        self.app_password = secrets.token_hex(12)
        self._auth_enabled = False
        self._token: str | None = None

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def hostport(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "EtcdServer":
        self.peer_port = 0
        return super().start()  # type: ignore[return-value]

    def command(self) -> list[str]:
        if not self.peer_port:  # kept across restarts: the member's data names it
            self.peer_port = free_port()
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [self.binary, "--name", "s3lect", "--data-dir", str(self.workdir / "data"),
               "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
               "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
               "--initial-cluster", f"s3lect={peer}", "--logger", "zap", "--log-level", "warn"]
        if self.tls:
            cmd += ["--cert-file", str(self.tls["server"]), "--key-file",
                    str(self.tls["server-key"]), "--client-cert-auth", "--trusted-ca-file",
                    str(self.tls["ca"])]
        if self.token_ttl:
            cmd += ["--auth-token-ttl", str(self.token_ttl)]
        return cmd

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        ctx = ssl.create_default_context(cafile=str(self.tls["ca"]))
        ctx.load_cert_chain(str(self.tls["client"]), str(self.tls["client-key"]))
        return ctx

    def request(self, path: str, body: dict, token: str | None = None,
                timeout: float = 5) -> tuple[int, dict]:
        """POST body (JSON) to the v3 gateway: (status, JSON answer)."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = token
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._ssl()) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read() or b"{}")
            except ValueError:
                return e.code, {}

    def ready(self) -> bool:
        try:
            req = urllib.request.Request(self.endpoint + "/health")
            with urllib.request.urlopen(req, timeout=2, context=self._ssl()) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def etcdctl(self, *args: str, user: str | None = None) -> str:
        cmd = ["etcdctl", "--endpoints", self.endpoint]
        if self.tls:
            cmd += ["--cacert", str(self.tls["ca"]), "--cert", str(self.tls["client"]), "--key",
                    str(self.tls["client-key"])]
        if user:
            cmd += ["--user", user]
        r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, ETCDCTL_API="3"))
        if r.returncode != 0:
            raise RuntimeError(f"etcdctl {' '.join(args[:3])}: {r.stderr.strip()}")
        return r.stdout

    def on_ready(self) -> None:
        if not self.auth or self._auth_enabled:
            return
        self.etcdctl("user", "add", f"root:{self.root_password}")
        self.etcdctl("role", "add", "root")
        self.etcdctl("user", "grant-role", "root", "root")
        self.etcdctl("user", "add", f"{APP_USER}:{self.app_password}")
        self.etcdctl("role", "add", APP_USER)
        self.etcdctl("role", "grant-permission", APP_USER, "readwrite", "--prefix=true",
                     APP_PREFIX)
        self.etcdctl("user", "grant-role", APP_USER, APP_USER)
        self.etcdctl("auth", "enable")
        self._auth_enabled = True

    def _root_token(self) -> str | None:
        if not self.auth:
            return None
        status, ans = self.request("/v3/auth/authenticate",
                                   {"name": "root", "password": self.root_password})
        if status != 200:
            raise RuntimeError(f"authenticating as root: HTTP {status} {ans}")
        return ans["token"]

    def lock_prefix(self) -> str:
        return f"{'etcds' if self.tls else 'etcd'}://{self.hostport}/{PREFIX}"

    def env(self) -> dict[str, str]:
        return {
            "S3LECT_TEST_ETCD_ENDPOINT": self.endpoint,
            "S3LECT_TEST_LOCK_PREFIX": self.lock_prefix(),
        }

    # Direct access for tests (what the store wrote, tampering).
    def get_key(self, key: str) -> tuple[bytes | None, int]:
        """The key's value and mod_revision ((None, 0) when absent)."""
        status, ans = self.request("/v3/kv/range", {"key": _b64(key)}, self._root_token())
        if status != 200:
            raise RuntimeError(f"range {key}: HTTP {status} {ans}")
        kvs = ans.get("kvs") or []
        if not kvs:
            return None, 0
        return base64.b64decode(kvs[0].get("value", "")), int(kvs[0]["mod_revision"])

    def put_key(self, key: str, value: bytes) -> int:
        """An unconditional write: the new revision."""
        status, ans = self.request("/v3/kv/put", {"key": _b64(key), "value": _b64(value)},
                                   self._root_token())
        if status != 200:
            raise RuntimeError(f"put {key}: HTTP {status} {ans}")
        return int(ans["header"]["revision"])


def _b64(v: str | bytes) -> str:
    return base64.b64encode(v.encode() if isinstance(v, str) else v).decode()


if __name__ == "__main__":
    print(etcd_binary())
    sys.exit(0)
