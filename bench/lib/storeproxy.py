# SPDX-License-Identifier: Apache-2.0
"""Counting proxies for the stores other than S3 (bench/lib/cost_stores.py).

Both forward one node's connections to the store server untouched and count
what the node asked for, keyed by a short type name:

- HttpTypeProxy: HTTP/1.1 (DynamoDB, Route 53, S3): tests/harness/countproxy.py
  with each request counted under classify(method, path, headers): DynamoDB's
  X-Amz-Target action (GetItem, PutItem), Route 53's method and path.
- PgProxy: PostgreSQL's wire protocol (v3). Every statement the client sends
  is counted by its first keyword: a Query message ('Q', the simple protocol:
  s3lect's `SET statement_timeout` on each new connection) or a Parse message
  ('P', the extended protocol libpq's PQsendQueryParams uses: SELECT, INSERT,
  UPDATE). Connections are counted as they are accepted.
- TlsHttpTypeProxy: HttpTypeProxy for a store spoken to over TLS (the
  Kubernetes API server): it terminates the node's TLS with the server's own
  certificate and key (the harness's, for 127.0.0.1) and opens its own TLS
  connection to the server, so it can read and count each request.
- MySqlProxy: MySQL's client/server protocol. Every COM_QUERY the client
  sends is counted by its first keyword (s3lect's MySQL store sends each
  statement as text: SELECT, INSERT, UPDATE, SET); other commands by name.
- RedisProxy: RESP commands by name.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from harness.countproxy import CountingProxy  # noqa: E402

Classifier = Callable[[str, str, dict[str, str]], str]


def _shutdown(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class HttpTypeProxy(CountingProxy):
    """Counts HTTP requests under classify(method, path, headers) (header
    names lower-case)."""

    def __init__(self, upstream_host: str, upstream_port: int, classify: Classifier):
        self.classify = classify
        super().__init__(upstream_host, upstream_port)

    def key(self, method: str, path: str, headers: dict[str, str]) -> str:
        return self.classify(method, path, headers)


class TlsHttpTypeProxy(HttpTypeProxy):
    """HttpTypeProxy between a TLS client and a TLS server: the node's
    connection is answered with cert/key (which its CA bundle must trust for
    127.0.0.1), the server's is verified against ca."""

    def __init__(self, upstream_host: str, upstream_port: int, classify: Classifier,
                 cert: Path, key: Path, ca: Path):
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(str(cert), str(key))
        self._client_ctx = ssl.create_default_context(cafile=str(ca))
        super().__init__(upstream_host, upstream_port, classify)

    @property
    def endpoint(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def _workers(self, client: socket.socket, upstream: socket.socket):
        try:
            client.settimeout(10)
            tclient = self._server_ctx.wrap_socket(client, server_side=True)
            tclient.settimeout(None)
            tup = self._client_ctx.wrap_socket(upstream, server_hostname="127.0.0.1")
        except (OSError, ssl.SSLError):
            _shutdown(client, upstream)
            return ()
        with self._lock:
            self._conns += [tclient, tup]
        return super()._workers(tclient, tup)


SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102


class PgProxy(CountingProxy):
    """Counts PostgreSQL statements by first keyword ("SELECT", "SET", ...) and
    connections ("connections"). TLS is not looked into: the bench's server
    has none, so libpq's SSLRequest is refused and the session is plain."""

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            self.counts["connections"] += 1
        buf = b""
        started = False  # after the startup message, messages carry a type byte
        try:
            while not self._stop.is_set():
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
                buf += data
                while True:
                    if not started:
                        if len(buf) < 8:
                            break
                        (n,) = struct.unpack("!I", buf[:4])
                        if len(buf) < n:
                            break
                        (code,) = struct.unpack("!I", buf[4:8])
                        buf = buf[n:]
                        if code not in (SSL_REQUEST, GSSENC_REQUEST):
                            started = code != CANCEL_REQUEST
                        continue
                    if len(buf) < 5:
                        break
                    kind = buf[:1]
                    (n,) = struct.unpack("!I", buf[1:5])
                    if len(buf) < 1 + n:
                        break
                    body, buf = buf[5:1 + n], buf[1 + n:]
                    sql = None
                    if kind == b"Q":
                        sql = body.split(b"\0", 1)[0]
                    elif kind == b"P":  # statement name, then the query
                        rest = body.split(b"\0", 1)
                        sql = rest[1].split(b"\0", 1)[0] if len(rest) > 1 else b""
                    if sql is not None:
                        word = (sql.decode("utf-8", "replace").split() or ["(empty)"])[0].upper()
                        with self._lock:
                            self.counts[word] += 1
        except OSError:
            pass
        finally:
            _shutdown(client, upstream)


MYSQL_COMMANDS = {0x01: "COM_QUIT", 0x02: "COM_INIT_DB", 0x0e: "COM_PING",
                  0x11: "COM_CHANGE_USER", 0x16: "COM_STMT_PREPARE", 0x17: "COM_STMT_EXECUTE",
                  0x1f: "COM_RESET_CONNECTION"}


class MySqlProxy(CountingProxy):
    """Counts MySQL statements by first keyword ("SELECT", "UPDATE", ...),
    other commands by name, and connections ("connections"). A command is
    a client packet of sequence number 0; the login packets (the handshake
    response, an auth switch's answer) come at 1 and up. A client that
    asks for TLS could not be looked into: the bench's server has none, so
    the session is plain."""

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            self.counts["connections"] += 1
        buf = b""
        try:
            while not self._stop.is_set():
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
                buf += data
                while len(buf) >= 4:
                    n = buf[0] | buf[1] << 8 | buf[2] << 16
                    if len(buf) < 4 + n:
                        break
                    seq, payload, buf = buf[3], buf[4:4 + n], buf[4 + n:]
                    if seq != 0 or not payload:
                        continue
                    if payload[0] == 0x03:  # COM_QUERY
                        text = payload[1:].decode("utf-8", "replace").split()
                        word = (text or ["(empty)"])[0].upper()
                    else:
                        word = MYSQL_COMMANDS.get(payload[0], f"COM_0x{payload[0]:02x}")
                    with self._lock:
                        self.counts[word] += 1
        except OSError:
            pass
        finally:
            _shutdown(client, upstream)


def resp_commands(buf: bytes) -> tuple[list[list[bytes]], bytes]:
    """The complete RESP arrays of bulk strings (commands as a client sends
    them) at the start of buf, and what is left (an incomplete command)."""
    out = []
    while buf.startswith(b"*"):
        end = buf.find(b"\r\n")
        if end < 0:
            break
        n, pos, args = int(buf[1:end]), end + 2, []
        for _ in range(n):
            e = buf.find(b"\r\n", pos)
            if e < 0 or buf[pos:pos + 1] != b"$":
                return out, buf
            ln = int(buf[pos + 1:e])
            if len(buf) < e + 2 + ln + 2:
                return out, buf
            args.append(buf[e + 2:e + 2 + ln])
            pos = e + 2 + ln + 2
        out.append(args)
        buf = buf[pos:]
    return out, buf


class RedisProxy(CountingProxy):
    """Counts Redis commands by name, from RESP (plain TCP: the bench's
    server has no TLS). The store's two scripts are told apart by their
    argument count: EVALSHA SHA 1 KEY is the read, EVALSHA SHA 1 KEY RECORD
    IF_MATCH VERSION the write (EVAL likewise, when the script was not
    cached). Connections are counted as they are accepted."""

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            self.counts["connections"] += 1
        buf = b""
        try:
            while not self._stop.is_set():
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
                cmds, buf = resp_commands(buf + data)
                for args in cmds:
                    name = args[0].decode("ascii", "replace").upper() if args else "(empty)"
                    if name in ("EVALSHA", "EVAL"):
                        name += " (write)" if len(args) > 4 else " (read)"
                    with self._lock:
                        self.counts[name] += 1
        except (OSError, ValueError):
            pass
        finally:
            _shutdown(client, upstream)
