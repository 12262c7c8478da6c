# SPDX-License-Identifier: Apache-2.0
"""STS for the credential tests: a SigV4-signed AssumeRole client (standard
library only, independent of the C library) and a fake STS for the answers
real servers do not give on demand (AccessDenied, ExpiredToken, Throttling,
malformed XML).

Command line, used as a credential_process by tests/s3/test_s3_creds.py:

    python3 tests/harness/sts.py process ENDPOINT [--report-seconds N]

reads the caller's keys from STS_ACCESS_KEY/STS_SECRET_KEY, calls
AssumeRole at ENDPOINT (MinIO's own STS) and prints the credential_process
JSON (Version 1). With --report-seconds the Expiration it prints is N seconds
from now (MinIO's shortest lifetime is 15 minutes; a shorter reported one
makes s3lect refresh often, each time with new real credentials). Each run
appends "AKID SECRET TOKEN" to $STS_COUNT_FILE if set (the
test greps s3lect's output for them). Never prints a secret on stderr.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import http.server
import json
import os
import re
import sys
import threading
import urllib.parse


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def assume_role(endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1",
                duration: int = 900, timeout: float = 10) -> dict:
    """AssumeRole at endpoint; returns {AccessKeyId, SecretAccessKey, SessionToken, Expiration}."""
    u = urllib.parse.urlsplit(endpoint)
    host = f"{u.hostname}:{u.port}" if u.port else u.hostname
    body = urllib.parse.urlencode(
        {"Action": "AssumeRole", "Version": "2011-06-15", "DurationSeconds": str(duration)}
    ).encode()
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    headers = {
        "content-type": "application/x-www-form-urlencoded; charset=utf-8",
        "host": host,
        "x-amz-date": amz_date,
    }
    names = sorted(headers)
    canonical = "\n".join(
        ["POST", "/", "", "".join(f"{n}:{headers[n]}\n" for n in names), ";".join(names),
         hashlib.sha256(body).hexdigest()]
    )
    scope = f"{date}/{region}/sts/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    k = _hmac(("AWS4" + secret_key).encode(), date)
    for part in (region, "sts", "aws4_request"):
        k = _hmac(k, part)
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
        f"SignedHeaders={';'.join(names)}, Signature={sig}"
    )
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        conn.request("POST", "/", body=body, headers=headers)
        r = conn.getresponse()
        text = r.read().decode(errors="replace")
    finally:
        conn.close()
    if r.status != 200:
        code = re.search(r"<Code>([^<]*)</Code>", text)
        raise RuntimeError(f"AssumeRole answered HTTP {r.status} {code.group(1) if code else ''}")
    out = {}
    for tag in ("AccessKeyId", "SecretAccessKey", "SessionToken", "Expiration"):
        m = re.search(rf"<{tag}>([^<]*)</{tag}>", text)
        if not m:
            raise RuntimeError(f"AssumeRole answer lacks {tag}")
        out[tag] = m.group(1)
    return out


def process_main(argv: list[str]) -> int:
    endpoint = argv[0]
    report = None
    if len(argv) >= 3 and argv[1] == "--report-seconds":
        report = float(argv[2])
    try:
        creds = assume_role(endpoint, os.environ["STS_ACCESS_KEY"], os.environ["STS_SECRET_KEY"])
    except (OSError, RuntimeError, KeyError) as e:
        print(f"sts.py: {e}", file=sys.stderr)
        return 1
    if report is not None:
        t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=report)
        creds["Expiration"] = t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    count = os.environ.get("STS_COUNT_FILE")
    if count:
        with open(count, "a") as f:
            # The test's own file: it greps s3lect's logs for these.
            f.write(f'{creds["AccessKeyId"]} {creds["SecretAccessKey"]} {creds["SessionToken"]}\n')
    print(json.dumps({"Version": 1, **creds}))
    return 0


class FakeSts:
    """A loopback STS that answers each request with the next canned answer
    (status, body); records the form fields it received."""

    def __init__(self, answers: list[tuple[int, str]]):
        self.answers = list(answers)
        self.requests: list[dict[str, str]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("content-length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
                form["_authorization"] = self.headers.get("authorization") or ""
                fake.requests.append(form)
                status, body = fake.answers.pop(0) if fake.answers else (500, "")
                data = body.encode()
                self.send_response(status)
                self.send_header("content-type", "text/xml")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeSts":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def sts_answer(akid: str, secret: str, token: str, seconds: float, arn: str,
               action: str = "AssumeRole") -> str:
    """A successful STS answer (action AssumeRole or AssumeRoleWithWebIdentity)
    with these credentials, expiring `seconds` from now."""
    exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return (
        f"<{action}Response><{action}Result>"
        f"<AssumedRoleUser><Arn>{arn}</Arn></AssumedRoleUser>"
        f"<Credentials><AccessKeyId>{akid}</AccessKeyId><SecretAccessKey>{secret}"
        f"</SecretAccessKey><SessionToken>{token}</SessionToken>"
        f"<Expiration>{exp.strftime('%Y-%m-%dT%H:%M:%SZ')}</Expiration></Credentials>"
        f"</{action}Result></{action}Response>"
    )


def error_xml(code: str, message: str) -> str:
    return (
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error>"
        f"<Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        "<RequestId>req-1234</RequestId></ErrorResponse>"
    )


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "process":
        sys.exit(process_main(sys.argv[2:]))
    print("usage: sts.py process ENDPOINT [--report-seconds N]", file=sys.stderr)
    sys.exit(2)
