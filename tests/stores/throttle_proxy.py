# SPDX-License-Identifier: Apache-2.0
"""An HTTP/1.1 proxy on 127.0.0.1 in front of DynamoDB Local or moto that can
answer every request with the service's throttling error for a while, as
DynamoDB does when a table's capacity is exceeded and Route 53 past its
request rate. Each request is forwarded on a fresh
upstream connection and its answer relayed (Content-Length bodies)."""

from __future__ import annotations

import socket
import threading
import time

from harness.cli import only_leader, wait_for

THROTTLE_BODY = (b'{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",'
                 b'"message":"The level of configured provisioned throughput for the table was exceeded."}')
DYNAMODB_THROTTLE = (b"application/x-amz-json-1.0", THROTTLE_BODY)
# What Azure Storage answers when an account or partition is over its limits
# (with status 503 or 429 and x-ms-error-code: ServerBusy).
AZURE_THROTTLE = (b"application/xml",
                  b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>'
                  b"The server is busy.</Message></Error>")
# What Route 53 answers past its 5 requests per second per account.
ROUTE53_THROTTLE = (b"text/xml",
                    b'<?xml version="1.0"?>\n<ErrorResponse xmlns="https://route53.amazonaws.com/doc/'
                    b'2013-04-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate '
                    b"exceeded</Message></Error><RequestId>throttle-proxy</RequestId></ErrorResponse>")
# What Cloud Storage answers past an object's write rate (one a second).
GCS_THROTTLE = (b"application/json",
                b'{"error":{"code":429,"message":"The object exceeded the rate limit for object '
                b'mutation operations (create, update, and delete).","errors":[{"reason":'
                b'"rateLimitExceeded"}]}}')


def _read_message(sock: socket.socket, deadline: float) -> bytes | None:
    """One HTTP message (head + Content-Length or chunked body), or None on EOF/timeout."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if time.monotonic() > deadline:
            return None
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            return None
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    chunked = False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip() or 0)
        if k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
            chunked = True  # Azurite's error answers: relayed up to the last chunk
    while chunked and not (rest.startswith(b"0\r\n\r\n") or b"\r\n0\r\n\r\n" in rest):
        if time.monotonic() > deadline:
            return None
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            return None
        rest += data
    if chunked:
        return head + b"\r\n\r\n" + rest
    while len(rest) < length:
        if time.monotonic() > deadline:
            return None
        try:
            data = sock.recv(65536)
        except socket.timeout:
            continue
        if not data:
            return None
        rest += data
    return head + b"\r\n\r\n" + rest[:length]


class ThrottleProxy:
    def __init__(self, upstream_port: int, answer: tuple[bytes, bytes] = DYNAMODB_THROTTLE,
                 status: bytes = b"400 Bad Request", check=None, headers: bytes = b""):
        """status: the throttling answer's status line; headers: its extra
        headers (complete "Name: value\r\n" lines: Azure's x-ms-error-code:
        ServerBusy); check(request bytes) -> bool: a request it refuses is
        answered 401 (a server that checks tokens)."""
        self.upstream = ("127.0.0.1", upstream_port)
        self.content_type, self.body = answer
        self.status, self.headers = status, headers
        self.check = check
        self.refused = 0
        self.throttle_until = 0.0
        self.throttled = 0
        self.forwarded = 0
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def throttle_for(self, seconds: float) -> None:
        self.throttle_until = time.monotonic() + seconds

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        for t in self._threads:
            t.join(timeout=5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            c.settimeout(0.2)
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, c: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                req = _read_message(c, time.monotonic() + 60)
                if req is None:
                    return
                if time.monotonic() < self.throttle_until:
                    with self._lock:
                        self.throttled += 1
                    c.sendall(b"HTTP/1.1 " + self.status + b"\r\n" + self.headers +
                              b"Content-Type: " + self.content_type +
                              b"\r\nContent-Length: " + str(len(self.body)).encode() +
                              b"\r\n\r\n" + self.body)
                    continue
                if self.check is not None and not self.check(req):
                    with self._lock:
                        self.refused += 1
                    body = b'{"error":{"code":401,"message":"Invalid Credentials"}}'
                    c.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json"
                              b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                    continue
                with socket.create_connection(self.upstream, timeout=10) as u:
                    u.sendall(req)
                    resp = _read_message(u, time.monotonic() + 30)
                if resp is None:
                    return
                with self._lock:
                    self.forwarded += 1
                c.sendall(resp)
        except OSError:
            pass
        finally:
            c.close()


def ride_out(proxy: ThrottleProxy, nodes: list, lease_s: float, words: list[str],
             past_the_lease: bool = True) -> None:
    """Every store's throttling test, on nodes electing through proxy. Throttled
    for 1.2 s (less than the renew deadline): retried with back-off, the
    leader keeps its term and stays the only one, and the logs say "will
    retry" and each of words. Then (past_the_lease) throttled for longer than
    the lease: the leader steps down (no renewal), nobody takes over
    meanwhile, and a leader is back within lease_s + 20 s."""
    leader = wait_for(lambda: only_leader(nodes), 30, "a leader")
    term = leader.terms()[-1]
    proxy.throttle_for(1.2)
    time.sleep(lease_s + 1)
    assert proxy.throttled > 0, "the proxy throttled nothing"
    assert leader.leading() and leader.terms()[-1] == term, leader.text()
    assert sum(n.leading() for n in nodes) == 1
    texts = "".join(n.text() for n in nodes)
    assert all(w in texts for w in [*words, "will retry"]), (words, texts)
    if past_the_lease:
        proxy.throttle_for(lease_s + 2)
        wait_for(lambda: not leader.leading(), lease_s + 3, "the leader to step down")
        assert not any(n.leading() for n in nodes)
        wait_for(lambda: only_leader(nodes), lease_s + 20, "a leader after throttling")
