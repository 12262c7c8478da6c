# SPDX-License-Identifier: Apache-2.0
"""SSO for the credential tests (tests/s3/test_s3_creds.py,
tests/python/test_credentials.py): a loopback portal that hands out
credentials for one bearer token, and the files an ``sso_session`` profile
needs (the cached token under $HOME/.aws/sso/cache and the config).
"""

from __future__ import annotations

import datetime
import hashlib
import http.server
import json
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple


def minio_minter(minio: Any) -> Callable[[], Dict[str, str]]:
    """Fresh MinIO STS credentials at each call (assume_role's dict)."""
    from .sts import assume_role

    return lambda: assume_role(minio.endpoint, minio.access_key, minio.secret_key)


class FakePortal:
    """The SSO portal's GET /federation/credentials on 127.0.0.1: answers
    with mint()'s credentials when x-amz-sso_bearer_token equals bearer,
    else 401; records (path, query) of every request in `seen` and every
    set of credentials it handed out in `handed`."""

    def __init__(self, minio_or_mint: Any, bearer: str):
        mint = minio_or_mint if callable(minio_or_mint) else minio_minter(minio_or_mint)
        self.seen: List[Tuple[str, dict]] = []
        self.handed: List[Dict[str, str]] = []
        portal = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                u = urllib.parse.urlsplit(self.path)
                q = dict(urllib.parse.parse_qsl(u.query))
                portal.seen.append((u.path, q))
                if self.headers.get("x-amz-sso_bearer_token") != bearer:
                    self.send_response(401)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                c = mint()
                portal.handed.append(c)
                exp = int(datetime.datetime.fromisoformat(
                    c["Expiration"].replace("Z", "+00:00")).timestamp() * 1000)
                body = json.dumps({"roleCredentials": {
                    "accessKeyId": c["AccessKeyId"], "secretAccessKey": c["SecretAccessKey"],
                    "sessionToken": c["SessionToken"], "expiration": exp}}).encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def __enter__(self) -> "FakePortal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def write_sso_session(home: Path, config: Path, bearer: str, session: str = "corp",
                      profile: str = "dev", account: str = "111122223333",
                      role: str = "Leader") -> Path:
    """Profile `profile` (sso_session form) in config and a cached token
    valid for an hour under home/.aws/sso/cache; returns the cache file."""
    cache = home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha1(session.encode()).hexdigest()
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    path = cache / f"{name}.json"
    path.write_text(json.dumps(
        {"startUrl": f"https://{session}.awsapps.com/start", "region": "eu-west-1",
         "accessToken": bearer, "expiresAt": later.strftime("%Y-%m-%dT%H:%M:%SZ")}))
    config.write_text(
        f"[profile {profile}]\nsso_session = {session}\nsso_account_id = {account}\n"
        f"sso_role_name = {role}\n[sso-session {session}]\n"
        f"sso_start_url = https://{session}.awsapps.com/start\nsso_region = eu-west-1\n")
    return path
