# SPDX-License-Identifier: Apache-2.0
"""A container-credentials endpoint of the tests' own (what ECS's agent and the
EKS Pod Identity agent serve), on a free 127.0.0.1 port, in a thread.

The answer is chosen by the request's path, so one server serves every case
and a test (C or Python) picks a case by the URL it configures:

    /creds                  the credentials JSON (AccessKeyId, SecretAccessKey,
                            Token, Expiration, RoleArn); when `token` is set,
                            the Authorization header must equal it (else 401)
    /auth/<tok>/creds       the credentials when Authorization equals <tok>
                            (percent-decoded),
                            else 401 with {"code": .., "message": ..}
    /longterm               only AccessKeyId and SecretAccessKey
    /garbage                200 with bytes that are not JSON
    /notobject              200 with a JSON array
    /nosecret               200 without SecretAccessKey
    /badexpiry              200 with Expiration "next tuesday"
    /huge                   200 with a 200 KiB body
    /status/<n>             HTTP <n> with an error JSON
    /slow/<ms>/...          waits <ms> ms (bounded by 10 s), then answers the rest
    /_count                 how many requests came before (not counted), as JSON
    /_last_auth             {"had_auth": 1 or 0}: did the last request have an
                            Authorization header

Anything else is 404. Credentials are throwaway values chosen at
construction; `set_creds` swaps them (rotation).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.parse
from datetime import datetime, timedelta, timezone

from .httpthread import QuietHandler, ThreadedHttpServer


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def throwaway_creds(hours: float = 6.0) -> dict:
    """A fresh set of throwaway temporary credentials."""
    return {
        "AccessKeyId": "ASIATEST" + secrets.token_hex(6).upper(),
        "SecretAccessKey": secrets.token_urlsafe(30),
        "Token": "TOK" + secrets.token_urlsafe(48),
        "Expiration": rfc3339(datetime.now(timezone.utc) + timedelta(hours=hours)),
        "RoleArn": "arn:aws:iam::123456789012:role/s3lect-test-task",
    }


class _Handler(QuietHandler):
    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_body(status, body, ctype)

    def _json(self, status: int, obj) -> None:
        self._send(status, json.dumps(obj).encode())

    def do_PUT(self):  # noqa: N802
        self._json(405, {"code": "MethodNotAllowed", "message": "GET only"})

    def do_GET(self):  # noqa: N802
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if path == "/_count":
            return self._json(200, {"count": owner.count})
        if path == "/_last_auth":
            return self._json(200, {"had_auth": int(owner.last_had_auth)})
        auth = self.headers.get("Authorization")
        with owner.lock:
            owner.count += 1
            owner.last_had_auth = auth is not None
            creds = dict(owner.creds)
            want = owner.token
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "slow":
            try:
                ms = min(int(parts[1]), 10000)
            except ValueError:
                return self._json(400, {"code": "BadSlow", "message": "not a number"})
            time.sleep(ms / 1000.0)
            parts = parts[2:]
        if parts and parts[0] == "auth" and len(parts) >= 2:
            want = urllib.parse.unquote(parts[1])
            parts = parts[2:]
        if want is not None and auth != want:
            return self._json(401, {"code": "AccessDenied", "message": "authorization token refused"})
        case = "/".join(parts)
        if case == "creds":
            return self._json(200, creds)
        if case == "longterm":
            return self._json(200, {"AccessKeyId": creds["AccessKeyId"],
                                    "SecretAccessKey": creds["SecretAccessKey"]})
        if case == "garbage":
            return self._send(200, b"\x00{not json at all\xff", "text/plain")
        if case == "notobject":
            return self._json(200, [creds])
        if case == "nosecret":
            c = dict(creds)
            del c["SecretAccessKey"]
            return self._json(200, c)
        if case == "badexpiry":
            c = dict(creds)
            c["Expiration"] = "next tuesday"
            return self._json(200, c)
        if case == "huge":
            c = dict(creds)
            c["Padding"] = "x" * (200 * 1024)
            return self._json(200, c)
        if len(parts) == 2 and parts[0] == "status":
            try:
                n = int(parts[1])
            except ValueError:
                n = 400
            return self._json(n, {"code": "TestError", "message": f"the test asked for {n}"})
        return self._json(404, {"code": "NotFound", "message": "no such test case"})


class ContainerCredsServer(ThreadedHttpServer):
    """Start with `with ContainerCredsServer() as s:`; s.url("/creds")."""

    handler = _Handler
    thread_name = "container-creds"

    def __init__(self, creds: dict | None = None, token: str | None = None):
        super().__init__()
        self.creds = creds or throwaway_creds()
        self.token = token
        self.count = 0
        self.last_had_auth = False
        self.lock = threading.Lock()

    def url(self, path: str = "/creds") -> str:
        return self.base + path

    def set_creds(self, creds: dict) -> None:
        with self.lock:
            self.creds = dict(creds)
