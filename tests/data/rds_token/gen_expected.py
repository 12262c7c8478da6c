#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes expected.txt: IAM database authentication tokens for fixed
credentials and a fixed time, for tests/c/test_rds_token.c.

The signer here is written from the SigV4 documentation (query-string
authentication, a presigned GET of https://HOST:PORT/?Action=connect&DBUser=U
for the service rds-db, X-Amz-Expires=900, only the host header signed, the
SHA-256 of an empty payload), independently of libs3lect's C signer, with
nothing but hashlib and hmac. When botocore is importable, each token is also
checked against botocore's RDS generate_db_auth_token with the clock pinned
(a second, unrelated implementation); without it that check is skipped and
says so.

  python3 tests/data/rds_token/gen_expected.py [--check]

--check compares with the committed expected.txt instead of writing it.
Every value here is a throwaway: AWS's documentation example keys.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import sys
from pathlib import Path
from urllib.parse import quote

OUT = Path(__file__).resolve().parent / "expected.txt"

# name, host, port, user, region, access key id, secret, session token, unix time
CASES = [
    ("plain", "mydb.cluster-abcdefghijkl.us-east-1.rds.amazonaws.com", 5432, "iam_user",
     "us-east-1", "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, 1704164645),
    ("session", "db.example.internal", 3306, "app-user", "eu-west-1", "ASIAEXAMPLEEXAMPLE",
     "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
     "FwoGZXIvYXdzEXAMPLE//token+with/special=chars==", 1735689599),
    ("special_user", "127.0.0.1", 54321, "j\u00f6rg+ops/ro@example.com %&=?", "ap-southeast-2",
     "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", None, 946684800),
]


def enc(s: str) -> str:
    """SigV4's URI encoding: everything but A-Z a-z 0-9 - . _ ~ as %XX."""
    return quote(s.encode("utf-8"), safe="-._~")


def token(host, port, user, region, akid, secret, session, t) -> str:
    when = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    scope = f"{day}/{region}/rds-db/aws4_request"
    params = [
        ("Action", "connect"),
        ("DBUser", user),
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
        ("X-Amz-Credential", f"{akid}/{scope}"),
        ("X-Amz-Date", amz_date),
        ("X-Amz-Expires", "900"),
        ("X-Amz-SignedHeaders", "host"),
    ]
    if session:
        params.append(("X-Amz-Security-Token", session))
    hostport = f"{host}:{port}"
    canonical_query = "&".join(f"{enc(k)}={enc(v)}" for k, v in sorted(params))
    canonical_request = "\n".join([
        "GET", "/", canonical_query, f"host:{hostport}", "", "host",
        hashlib.sha256(b"").hexdigest(),
    ])
    string_to_sign = "\n".join([
        "AWS4-HMAC-SHA256", amz_date, scope,
        hashlib.sha256(canonical_request.encode()).hexdigest(),
    ])
    key = ("AWS4" + secret).encode()
    for part in (day, region, "rds-db", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    query = "&".join(f"{k}={enc(v)}" for k, v in params)
    return f"{hostport}/?{query}&X-Amz-Signature={sig}"


def botocore_token(host, port, user, region, akid, secret, session, t):
    """botocore's token for the same inputs at time t, or None without botocore."""
    try:
        import botocore.auth
        import botocore.session
        from unittest import mock
    except ImportError:
        return None
    fixed = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).replace(tzinfo=None)

    class Clock(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return fixed

        @classmethod
        def now(cls, tz=None):
            return fixed if tz is None else fixed.replace(tzinfo=tz)

    s = botocore.session.get_session()
    client = s.create_client("rds", region_name=region, aws_access_key_id=akid,
                             aws_secret_access_key=secret, aws_session_token=session)
    with mock.patch.object(botocore.auth.datetime, "datetime", Clock):
        return client.generate_db_auth_token(host, port, user, Region=region)


def main() -> int:
    lines = []
    checked = 0
    for name, *args in CASES:
        tok = token(*args)
        other = botocore_token(*args)
        if other is not None:
            if other != tok:
                print(f"{name}: botocore disagrees:\n  ours     {tok}\n  botocore {other}",
                      file=sys.stderr)
                return 1
            checked += 1
        lines.append(f"{name}\t{tok}")
    text = (
        "# name<TAB>token: written by gen_expected.py (its own SigV4 presign; "
        + (f"{checked} of {len(CASES)} also checked against botocore)" if checked
           else "botocore not installed: not cross-checked)")
        + "\n" + "\n".join(lines) + "\n"
    )
    if "--check" in sys.argv[1:]:
        old = [l for l in OUT.read_text().splitlines() if not l.startswith("#")]
        if old != lines:
            print("expected.txt differs from what gen_expected.py makes", file=sys.stderr)
            return 1
        print(f"expected.txt agrees ({len(lines)} tokens, {checked} checked with botocore)")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(lines)} tokens, {checked} checked with botocore)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
