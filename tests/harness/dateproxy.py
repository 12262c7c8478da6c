# SPDX-License-Identifier: Apache-2.0
"""An HTTP/1.1 proxy for loopback tests that plays two faults of the field:

* ``date_ahead_s``: the ``Date`` of every answer runs that many seconds ahead
  of (negative: behind) the server's, as when the front end that stamps
  answers and the storage node that stamped ``Last-Modified`` have no clock
  sync (issue 38 item 2);
* ``cut``: while set, nothing is forwarded either way and no connection is
  closed: a host cut off without a TCP reset (a dropped link, a DROP rule).

Requests stream through untouched (the request side only notes each method,
so that an answer to HEAD is known to have no body); answers are parsed
just enough to rewrite the header block: Content-Length and chunked bodies.
"""
from __future__ import annotations

import collections
import email.utils
import socket
import time

from harness.countproxy import LoopbackProxy, RequestHeads


class DateProxy(LoopbackProxy):
    def __init__(self, upstream_host: str, upstream_port: int, date_ahead_s: float = 0.0):
        self.date_ahead_s = date_ahead_s
        self.cut = False
        self.answers = 0  # answers whose Date was rewritten
        super().__init__(upstream_host, upstream_port)

    # ---- plumbing ----

    def _hold(self) -> None:
        while self.cut and not self._stop.is_set():
            time.sleep(0.02)

    def _workers(self, client: socket.socket, upstream: socket.socket):
        methods: collections.deque[str] = collections.deque()
        return ((self._requests, (client, upstream, methods)),
                (self._answers, (upstream, client, methods)))

    def _requests(self, client: socket.socket, upstream: socket.socket,
                  methods: collections.deque[str]) -> None:
        heads = RequestHeads()
        try:
            while not self._stop.is_set():
                data = client.recv(65536)
                if not data:
                    break
                self._hold()
                # note the method of each request in the data
                methods.extend(method for method, _, _ in heads.feed(data))
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            self._shut(client, upstream)

    def _rewrite(self, head: str) -> str:
        lines = head.split("\r\n")
        for i, line in enumerate(lines):
            k, _, v = line.partition(":")
            if k.strip().lower() == "date":
                try:
                    t = email.utils.parsedate_to_datetime(v.strip()).timestamp()
                except (TypeError, ValueError):
                    continue
                lines[i] = "Date: " + email.utils.formatdate(t + self.date_ahead_s, usegmt=True)
                with self._lock:
                    self.answers += 1
        return "\r\n".join(lines)

    def _answers(self, upstream: socket.socket, client: socket.socket,
                 methods: collections.deque[str]) -> None:
        buf = b""

        def more() -> bool:
            nonlocal buf
            data = upstream.recv(65536)
            if not data:
                return False
            buf += data
            return True

        def forward(n: int) -> bool:  # n bytes of body as they come
            nonlocal buf
            while n > 0:
                if not buf and not more():
                    return False
                take = min(n, len(buf))
                self._hold()
                client.sendall(buf[:take])
                buf, n = buf[take:], n - take
            return True

        try:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    if not more():
                        return
                end = buf.index(b"\r\n\r\n")
                head, buf = buf[:end].decode("latin-1"), buf[end + 4:]
                status = int(head.split(" ", 2)[1]) if " " in head else 0
                method = methods.popleft() if methods else "GET"
                hdrs = {}
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                self._hold()
                client.sendall((self._rewrite(head) + "\r\n\r\n").encode("latin-1"))
                if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
                    continue
                if "chunked" in hdrs.get("transfer-encoding", "").lower():
                    while True:
                        while b"\r\n" not in buf:
                            if not more():
                                return
                        i = buf.index(b"\r\n")
                        size = int(buf[:i].split(b";")[0], 16)
                        if not forward(i + 2 + size + 2):
                            return
                        if size == 0:
                            break
                else:
                    if not forward(int(hdrs.get("content-length") or 0)):
                        return
        except (OSError, ValueError):
            pass
        finally:
            self._shut(client, upstream)
