"""A tiny SigV4-signed S3 client (path-style, plain HTTP to loopback) so that
tests can look at and tamper with lock objects without going through the
library under test. Standard library only."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import urllib.parse
from typing import Dict, Optional, Tuple


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class S3Client:
    def __init__(self, endpoint: str, access_key: str, secret_key: str,
                 region: str = "us-east-1", timeout: float = 10.0) -> None:
        u = urllib.parse.urlsplit(endpoint)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"S3Client needs an http:// endpoint, got {endpoint!r}")
        self.host = u.hostname
        self.port = u.port or 80
        self.netloc = u.netloc
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.timeout = timeout

    def request(self, method: str, path: str, body: bytes = b"",
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], bytes]:
        """Sends one signed request; returns (status, lower-cased headers, body)."""
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = now.strftime("%Y%m%d")
        uri = "/" + "/".join(urllib.parse.quote(seg, safe="-_.~") for seg in path.lstrip("/").split("/"))
        hdrs = {k.lower(): v for k, v in (headers or {}).items()}
        hdrs.update({
            "host": self.netloc,
            "x-amz-date": amz_date,
            "x-amz-content-sha256": _sha256(body),
        })
        names = sorted(hdrs)
        canonical = "\n".join([
            method,
            uri,
            "",
            "".join(f"{n}:{hdrs[n].strip()}\n" for n in names),
            ";".join(names),
            hdrs["x-amz-content-sha256"],
        ])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, _sha256(canonical.encode())])
        key = _hmac(("AWS4" + self.secret_key).encode(), day)
        for part in (self.region, "s3", "aws4_request"):
            key = _hmac(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        hdrs["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, uri, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        finally:
            conn.close()

    def create_bucket(self, bucket: str) -> None:
        status, _, body = self.request("PUT", bucket)
        if status not in (200, 409):  # 409: BucketAlreadyOwnedByYou
            raise RuntimeError(f"creating bucket {bucket!r} failed: HTTP {status} {body[:300]!r}")

    def get(self, bucket: str, key: str) -> Tuple[int, bytes, str]:
        """(status, body, etag) of an object."""
        status, hdrs, body = self.request("GET", f"{bucket}/{key}")
        return status, body, hdrs.get("etag", "")

    def put(self, bucket: str, key: str, data: bytes) -> Tuple[int, str]:
        """Unconditional PUT; (status, etag)."""
        status, hdrs, _ = self.request("PUT", f"{bucket}/{key}", data,
                                       {"content-type": "application/json"})
        return status, hdrs.get("etag", "")
