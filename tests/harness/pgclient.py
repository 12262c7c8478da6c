# SPDX-License-Identifier: Apache-2.0
"""A minimal PostgreSQL client for the tests (protocol 3, simple queries,
trust authentication, bounded by a socket timeout): the suites' Python has
no PostgreSQL driver. PgCursor is the part of a DB-API cursor
s3lect.recipes.postgres_fence uses (%s placeholders)."""
from __future__ import annotations

import socket
import struct
from typing import Any, List, Optional, Sequence, Tuple


class PgError(Exception):
    pass


class PgConn:
    """One connection; query() runs one simple query and returns its rows
    (tuples of str or None). Bounded by a socket timeout."""

    def __init__(self, host: str, port: int, user: str, database: str, timeout: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        params = b"user\0" + user.encode() + b"\0database\0" + database.encode() + b"\0\0"
        body = struct.pack("!I", 196608) + params
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)
        self._until_ready()

    def _recv(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise PgError("the server closed the connection")
            out += chunk
        return out

    def _msg(self) -> Tuple[bytes, bytes]:
        t = self._recv(1)
        (n,) = struct.unpack("!I", self._recv(4))
        return t, self._recv(n - 4)

    def _until_ready(self) -> List[Tuple[Optional[str], ...]]:
        rows: List[Tuple[Optional[str], ...]] = []
        err: Optional[str] = None
        while True:
            t, p = self._msg()
            if t == b"R" and struct.unpack("!I", p[:4])[0] != 0:
                raise PgError("the server asks for a password: the harness's server trusts")
            if t == b"E":
                fields = dict((f[:1], f[1:].decode()) for f in p.split(b"\0") if f)
                err = f"{fields.get(b'C', '?')}: {fields.get(b'M', '?')}"
            elif t == b"D":
                (ncol,) = struct.unpack("!H", p[:2])
                off, row = 2, []
                for _ in range(ncol):
                    (ln,) = struct.unpack("!i", p[off:off + 4])
                    off += 4
                    if ln < 0:
                        row.append(None)
                    else:
                        row.append(p[off:off + ln].decode())
                        off += ln
                rows.append(tuple(row))
            elif t == b"Z":
                if err:
                    raise PgError(err)
                return rows

    def query(self, sql: str) -> List[Tuple[Optional[str], ...]]:
        body = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!I", len(body) + 4) + body)
        return self._until_ready()

    def cursor(self) -> "PgCursor":
        return PgCursor(self)

    def close(self) -> None:
        try:
            self.sock.sendall(b"X" + struct.pack("!I", 4))
        except OSError:
            pass
        self.sock.close()


def _literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    s = str(v)
    assert "\0" not in s
    return "'" + s.replace("'", "''") + "'"  # standard_conforming_strings is on


class PgCursor:
    """The part of a DB-API cursor postgres_fence uses (%s placeholders)."""

    def __init__(self, conn: PgConn) -> None:
        self.conn = conn
        self.rows: List[Tuple[Optional[str], ...]] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        parts = sql.split("%s")
        assert len(parts) == len(params) + 1, (sql, params)
        text = parts[0] + "".join(_literal(p) + rest for p, rest in zip(params, parts[1:]))
        self.rows = self.conn.query(text)

    def fetchone(self) -> Optional[Tuple[Optional[str], ...]]:
        return self.rows.pop(0) if self.rows else None
