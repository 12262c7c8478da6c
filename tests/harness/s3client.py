# SPDX-License-Identifier: Apache-2.0
"""A small S3 client (standard library only) for the tests' own reads and writes.

It signs requests with AWS Signature Version 4 independently of the C
library, so a test can create buckets, plant or corrupt lock objects and
read what s3lect wrote without going through the code under test.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import urllib.parse
from dataclasses import dataclass


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str]

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")


def _quote(s: str, safe: str = "/") -> str:
    return urllib.parse.quote(s, safe=safe + "-_.~")


class S3Client:
    def __init__(self, endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1"):
        u = urllib.parse.urlsplit(endpoint)
        if u.scheme != "http":
            raise ValueError("the test client speaks plain http to loopback servers only")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region

    def _sign(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        date = amz_date[:8]
        payload = hashlib.sha256(body).hexdigest()
        headers["host"] = f"{self.host}:{self.port}"
        headers["x-amz-date"] = amz_date
        headers["x-amz-content-sha256"] = payload
        names = sorted(k.lower() for k in headers)
        lower = {k.lower(): " ".join(v.split()) for k, v in headers.items()}
        canonical = "\n".join(
            [
                method,
                path,
                "",
                "".join(f"{n}:{lower[n]}\n" for n in names),
                ";".join(names),
                payload,
            ]
        )
        scope = f"{date}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = ("AWS4" + self.secret_key).encode()
        for part in (date, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={sig}"
        )

    def request(
        self,
        method: str,
        bucket: str,
        key: str = "",
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> Response:
        path = "/" + _quote(bucket) + ("/" + _quote(key) if key else "")
        hdrs = dict(headers or {})
        self._sign(method, path, hdrs, body)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body if body or method == "PUT" else None, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, data, {k.lower(): v for k, v in r.getheaders()})
        finally:
            conn.close()

    def create_bucket(self, bucket: str) -> None:
        r = self.request("PUT", bucket)
        if r.status not in (200, 409):  # 409: it exists already (ours)
            raise RuntimeError(f"create bucket {bucket}: HTTP {r.status} {r.body[:300]!r}")

    def get(self, bucket: str, key: str) -> Response:
        return self.request("GET", bucket, key)

    def put(self, bucket: str, key: str, body: bytes, **headers: str) -> Response:
        return self.request("PUT", bucket, key, body, {k.replace("_", "-"): v for k, v in headers.items()})
