# SPDX-License-Identifier: Apache-2.0
"""A small HTTP server of the tests' own on a free 127.0.0.1 port, served by a
thread: the life cycle (start, stop, `with`) and the quiet handler base that
the container-credentials endpoint (container_creds.py) and the fake IMDS
(imds.py) share.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """Logs nothing (requests carry tokens); `send_body` answers in one go."""

    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: requests carry tokens
        pass

    def send_body(self, status: int, body: bytes | str, ctype: str,
                  extra: dict | None = None) -> None:
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ThreadedHttpServer"

    def handle_error(self, request, client_address):
        # Clients that give up (timeouts, oversized answers) reset connections.
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class ThreadedHttpServer:
    """Subclasses set `handler` (a QuietHandler; it reaches the subclass
    instance as self.server.owner) and `thread_name`."""

    handler: type[QuietHandler]
    thread_name = "http-server"

    def __init__(self) -> None:
        self._srv: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._srv is not None
        return self._srv.server_address[1]

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self._srv = _Server(("127.0.0.1", 0), self.handler)
        self._srv.owner = self
        self._thread = threading.Thread(target=self._srv.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        srv, self._srv = self._srv, None
        if srv is not None:
            srv.shutdown()
            srv.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
