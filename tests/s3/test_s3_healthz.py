# SPDX-License-Identifier: Apache-2.0
"""`s3lect run`'s /healthz and /leader (cli/metrics_http.c) when the store
refuses the credentials: the only errors that do not heal by themselves. A
proxy in front of MinIO answers every request 403 AccessDenied for a while,
as S3 does after a key is deactivated or a policy loses s3:PutObject; the
leader must step down and stop its command, /leader and /healthz must say
503 with the reason (a liveness probe then restarts the pod, which is what
fixes a mounted secret), and once the store accepts the keys again the
node must be healthy and lead again. No secret in the answers or the log."""

from __future__ import annotations

import json
import secrets
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from harness.cli import FAST, Node, wait_for
from harness.servers import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stores"))
from throttle_proxy import ThrottleProxy  # noqa: E402

ACCESS_DENIED = (b"application/xml",
                 b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                 b"<Message>Access Denied.</Message><Resource>/</Resource>"
                 b"<RequestId>healthz-proxy</RequestId></Error>")


def get(port: int, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_healthz_is_503_while_the_store_refuses_the_credentials(minio, s3lect_bin, clean_env,
                                                                 tmp_path):
    proxy = ThrottleProxy(int(minio.endpoint.rsplit(":", 1)[1]), ACCESS_DENIED,
                          status=b"403 Forbidden")
    env = dict(clean_env, AWS_ACCESS_KEY_ID=minio.access_key,
               AWS_SECRET_ACCESS_KEY=minio.secret_key, AWS_REGION=minio.region,
               AWS_EC2_METADATA_DISABLED="true", AWS_ENDPOINT_URL_S3=proxy.endpoint)
    lock = f"s3://{minio.bucket}/healthz/{secrets.token_hex(4)}.json"
    port = free_port()
    node = Node(s3lect_bin, tmp_path, lock, "solo", env,
                [*FAST, "--metrics-listen", f"127.0.0.1:{port}"])
    try:
        wait_for(node.leading, 30, "leadership through the proxy")
        wait_for(lambda: get(port, "/leader")[0] == 200, 10, "/leader 200 while leading")
        status, body = get(port, "/healthz")
        assert status == 200 and body["healthy"], body
        refused_at = time.monotonic()
        proxy.throttle_for(20)
        wait_for(lambda: get(port, "/healthz")[0] == 503, 10, "/healthz 503 on AccessDenied")
        seen = time.monotonic() - refused_at
        status, body = get(port, "/healthz")
        assert status == 503 and not body["healthy"], body
        assert "will not heal" in body["reason"] and "AccessDenied" in body["reason"], body
        assert body["lastError"], body
        wait_for(lambda: get(port, "/leader")[0] == 503, 10, "/leader 503 once it stepped down")
        wait_for(lambda: "lost leadership" in node.text(), 10, "the leader stepped down")
        print(f"/healthz 503 {seen:.2f}s after the store began refusing; reason: "
              f"{body['reason'][:160]}")
        # The keys work again: healthy, and leading again, without a restart.
        wait_for(lambda: time.monotonic() - refused_at > 20, 25, "the refusals' end")
        wait_for(lambda: get(port, "/healthz")[0] == 200, 30, "/healthz 200 again")
        wait_for(lambda: get(port, "/leader")[0] == 200, 30, "leading again")
        assert proxy.throttled > 0
    finally:
        node.stop()
        proxy.close()
    text = node.text()
    assert minio.secret_key not in text
    assert "Signature=" not in text
