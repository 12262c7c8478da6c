# SPDX-License-Identifier: Apache-2.0
"""A counting HTTP/1.1 proxy for loopback tests: forwards one client's
connections to an upstream server and counts requests by method.

It parses only what it must to find request boundaries (request line, headers,
Content-Length bodies); responses stream back untouched. Used to measure how
many S3 requests each node makes (peer mode, cost).
"""

from __future__ import annotations

import socket
import threading
from collections import Counter


class RequestHeads:
    """The requests of one client's HTTP/1.1 byte stream, fed as it arrives:
    each request's head (request line and headers); bodies are skipped by
    their Content-Length (no chunked requests). The one parser of the
    harness's proxies (counting, Date rewriting, outages)."""

    def __init__(self) -> None:
        self._buf = b""
        self._need = 0  # body bytes still to skip

    def feed(self, data: bytes) -> list[tuple[str, str, dict[str, str]]]:
        """(method, path, headers by lower-case name) of every request whose
        head data completes, in order. ValueError on a Content-Length that is
        no number."""
        self._buf += data
        out = []
        while True:
            if self._need:
                take = min(self._need, len(self._buf))
                self._buf, self._need = self._buf[take:], self._need - take
                if self._need:
                    return out
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                return out
            head, self._buf = self._buf[:end].decode("latin-1"), self._buf[end + 4:]
            lines = head.split("\r\n")
            parts = lines[0].split(" ")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            self._need = int(headers.get("content-length") or 0)
            out.append((parts[0], parts[1] if len(parts) > 1 else "", headers))


class LoopbackProxy:
    """A TCP listener on 127.0.0.1 that connects each client to the upstream
    server and runs the subclass's workers (``_workers``) on the pair; close()
    stops it and every connection it made."""

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.close()
                except OSError:
                    pass
        for t in self._threads:
            t.join(timeout=5)

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _workers(self, client: socket.socket, upstream: socket.socket):
        """(function, args) pairs, each run on a thread of its own."""
        raise NotImplementedError

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            # Transparent from here on: no idle timeout of its own (a 5 s one
            # closed the leader's keep-alive connection just as its next
            # renewal went out, at renew_interval 5 s). close() unblocks recv.
            # (The accepted client socket is blocking already.)
            upstream.settimeout(None)
            with self._lock:
                self._conns += [client, upstream]
            for target, args in self._workers(client, upstream):
                t = threading.Thread(target=target, args=args, daemon=True)
                t.start()
                self._threads.append(t)


class CountingProxy(LoopbackProxy):
    def __init__(self, upstream_host: str, upstream_port: int):
        self.counts: Counter[str] = Counter()
        super().__init__(upstream_host, upstream_port)

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)

    def _workers(self, client: socket.socket, upstream: socket.socket):
        return ((self._requests, (client, upstream)), (self._pipe, (upstream, client)))

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._shut(src, dst)

    def key(self, method: str, path: str, headers: dict[str, str]) -> str:
        """What a request is counted as (header names lower-case): its method;
        subclasses count by other parts (bench/lib/storeproxy.py)."""
        return method

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        heads = RequestHeads()
        try:
            while not self._stop.is_set():
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
                for method, path, headers in heads.feed(data):
                    with self._lock:
                        self.counts[self.key(method, path, headers)] += 1
        except OSError:
            pass
        finally:
            self._shut(client, upstream)
